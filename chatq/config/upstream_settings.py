"""The settings of the upstream: its endpoints and key, its timeouts, retries and cooldown, and
the rate limits calls to it are paced within."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config.env import Reading, file_path, flag, number, parse_urls, text, whole
from chatq.config.fields import setting

# fakellm's address under `make up`.
UPSTREAM_URLS = ("http://127.0.0.1:9100/v1",)


def read_upstream_urls(r: Reading) -> tuple[str, ...]:
    return parse_urls(r.text, UPSTREAM_URLS)


@dataclass(frozen=True, repr=False)
class UpstreamSettings:
    """The upstream and how it is called."""

    upstream_urls: tuple[str, ...] = setting(
        "CHATQ_UPSTREAM_URLS",
        UPSTREAM_URLS,
        read_upstream_urls,
        unit="URLs, comma-separated",
        doc="upstream base URLs (`…/v1`); several = endpoint choice and failover",
    )

    upstream_api_key: str = setting(
        "CHATQ_UPSTREAM_API_KEY",
        "",
        text,
        unit="secret",
        doc="sent as `Authorization: Bearer` to the upstream; never logged",
    )

    upstream_ca_file: str = setting(
        "CHATQ_UPSTREAM_CA_FILE",
        "",
        file_path,
        unit="path",
        note="the system's CAs",
        doc=(
            "PEM file of the CA that signed an `https://` upstream's certificate, for a private "
            "CA; the certificate and host name are always checked. A proxy for the upstream comes"
            " from the usual `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY`, read once per endpoint at"
            " the worker's start. The worker's requests session reads neither "
            "`REQUESTS_CA_BUNDLE` nor certifi's bundle (it trusts no environment but the "
            "proxies): a private CA goes here"
        ),
    )

    connect_timeout_s: float = setting(
        "CHATQ_UPSTREAM_CONNECT_TIMEOUT",
        5.0,
        number,
        unit="s",
        minimum=0.01,
        doc=(
            "TCP/TLS connect; a connection that fails is tried once more at once (see "
            "Retries), so an endpoint that never accepts costs up to twice this"
        ),
    )

    first_byte_timeout_s: float = setting(
        "CHATQ_UPSTREAM_FIRST_BYTE_TIMEOUT",
        60.0,
        number,
        unit="s",
        minimum=0.01,
        doc="from request to the first byte of the answer",
    )

    read_timeout_s: float = setting(
        "CHATQ_UPSTREAM_READ_TIMEOUT",
        30.0,
        number,
        unit="s",
        minimum=0.01,
        doc="between chunks once the answer streams",
    )

    max_attempts: int = setting(
        "CHATQ_UPSTREAM_MAX_ATTEMPTS",
        4,
        whole,
        unit="attempts",
        minimum=1,
        doc="per job, the first included (the retry budget, within `CHATQ_JOB_TIMEOUT`)",
    )

    retry_base_s: float = setting(
        "CHATQ_RETRY_BASE",
        0.5,
        number,
        unit="s",
        doc="exponential backoff base (full jitter, capped at 20 s)",
    )

    retry_after_max_s: float = setting(
        "CHATQ_RETRY_AFTER_MAX",
        30.0,
        number,
        unit="s",
        doc="cap on an upstream's `Retry-After`",
    )

    cooldown_s: float = setting(
        "CHATQ_UPSTREAM_COOLDOWN",
        30.0,
        number,
        unit="s",
        minimum=0.1,
        doc="how long a failing endpoint is skipped (shared by all workers through Redis)",
    )

    cooldown_after_failures: int = setting(
        "CHATQ_UPSTREAM_COOLDOWN_AFTER",
        3,
        whole,
        unit="failures",
        minimum=1,
        doc="consecutive connection errors / 5xx that start a cooldown",
    )

    upstream_pacing: bool = setting(
        "CHATQ_UPSTREAM_PACING",
        True,
        flag,
        doc=(
            "pace calls to each endpoint within its rate limits, learned from its `x-ratelimit-*`"
            " headers or set below; `0`: send at once, learn nothing (see [Pacing to the "
            "upstream's limits](#pacing-to-the-upstreams-limits))"
        ),
    )

    upstream_rpm: int = setting(
        "CHATQ_UPSTREAM_RPM",
        0,
        whole,
        unit="requests per minute",
        note="learn only",
        doc=(
            "each endpoint's request limit, when its answers do not say it (or to stay under what"
            " they say)"
        ),
    )

    upstream_tpm: int = setting(
        "CHATQ_UPSTREAM_TPM",
        0,
        whole,
        unit="tokens per minute",
        note="learn only",
        doc=(
            "each endpoint's token limit, counted as OpenAI counts: prompt tokens plus "
            "`max_tokens` (else `CHATQ_DEFAULT_OUTPUT_BUDGET`) times `n`"
        ),
    )
