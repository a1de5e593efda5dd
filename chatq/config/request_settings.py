"""The settings of what one request may ask for and how identical ones share an answer: the
cache, single-flight, the caps on `n`, output and context, and the queue's depth."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config.env import Choice, flag, number, whole
from chatq.config.fields import setting


@dataclass(frozen=True, repr=False)
class RequestSettings:
    """What a request may ask for, and the cache."""

    cache_ttl_s: int = setting(
        "CHATQ_CACHE_TTL",
        3600,
        whole,
        unit="s, `0` = off",
        doc=(
            "how long a deterministic (`temperature` 0) result is cached, and the longest a "
            "`Cache-Control: max-age` may ask for; `0` turns the cache and single-flight off"
        ),
    )

    cache_shared: bool = setting(
        "CHATQ_CACHE_SHARED",
        False,
        flag,
        doc="share cached results across key names (else each key has its own)",
    )

    cache_local_entries: int = setting(
        "CHATQ_CACHE_LOCAL_ENTRIES",
        1000,
        whole,
        unit="entries",
        doc="size of each web process's in-memory LRU in front of Redis",
    )

    cache_local_ttl_s: float = setting(
        "CHATQ_CACHE_LOCAL_TTL",
        60.0,
        number,
        unit="s",
        doc="longest an LRU entry is trusted",
    )

    max_followers: int = setting(
        "CHATQ_MAX_FOLLOWERS",
        100,
        whole,
        unit="jobs",
        doc=(
            "identical requests that may follow one running job (single-flight); more run on "
            "their own"
        ),
    )

    max_context_tokens: int = setting(
        "CHATQ_MAX_CONTEXT_TOKENS",
        0,
        whole,
        unit="tokens",
        note="model table only",
        doc="global cap on prompt + reserved answer tokens",
    )

    max_n: int = setting(
        "CHATQ_MAX_N",
        8,
        whole,
        unit="choices, `0` = no cap",
        doc=(
            "largest `n` a request may ask for (OpenAI's own limit, 128, always applies); more is"
            " `400`"
        ),
    )

    max_output_tokens: int = setting(
        "CHATQ_MAX_OUTPUT_TOKENS",
        0,
        whole,
        unit="tokens",
        note="no cap",
        doc=(
            "largest `max_tokens` / `max_completion_tokens` a request may ask for (more is "
            "`400`); a request naming neither is sent with `max_tokens` set to it"
        ),
    )

    context_overflow: str = setting(
        "CHATQ_CONTEXT_OVERFLOW",
        "reject",
        Choice(("reject", "truncate_oldest")),
        doc="default for prompts over the limit",
    )

    max_queue_depth: int = setting(
        "CHATQ_MAX_QUEUE_DEPTH",
        10000,
        whole,
        unit="jobs, `0` = no cap",
        doc=(
            "beyond it submissions get `503 queue_full` (each web reads the depth at most every "
            "0.1 s, so a burst within that time may pass the cap by what it adds)"
        ),
    )
