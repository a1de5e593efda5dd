"""Pacing to the upstream's own rate limits, shared by every worker (chatq/admission/pacing.lua).

An endpoint's limits are learned from the `x-ratelimit-*` headers of its answers (OpenAI's,
Azure OpenAI's, vLLM's and LiteLLM's alike) or configured (CHATQ_UPSTREAM_RPM and
CHATQ_UPSTREAM_TPM). Before a call, the worker takes the call's share of them; when there is
not enough, it waits for its turn instead of being answered 429.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from chatq import keys
from chatq.scripting import LuaScript

RATE_HEADER_PREFIX = "x-ratelimit-"
# ASCII digits only: `\d` and float() also take other scripts' digits, and float() "inf".
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_COUNT = re.compile(r"[0-9]{1,18}")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration_s(text: str) -> float | None:
    """Seconds of a duration as OpenAI's headers write one (Go's notation: `6m0s`,
    `120ms`, `1.5s`), or of a bare number of seconds; None when unreadable."""
    text = text.strip()
    seconds = parse_number(text)
    if seconds is not None:
        return seconds
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def parse_number(text: str) -> float | None:
    """A plain non-negative decimal number (ASCII digits, an optional fraction), or None."""
    text = text.strip()
    return float(text) if _NUMBER.fullmatch(text) else None


def _count(text: str) -> int:
    if not _COUNT.fullmatch(text.strip()):
        raise ValueError(f"not a count: {text[:40]!r}")
    return int(text)


@dataclass(frozen=True)
class Limit:
    """One limit as an answer reported it."""

    limit: int
    remaining: int
    full_in_s: float


def _limit(headers: Mapping[str, str], kind: str) -> Limit | None:
    try:
        limit = _count(headers[f"x-ratelimit-limit-{kind}"])
        remaining = _count(headers[f"x-ratelimit-remaining-{kind}"])
    except (KeyError, ValueError):
        return None
    full_in_s = parse_duration_s(headers.get(f"x-ratelimit-reset-{kind}", "")) or 0.0
    return Limit(limit, remaining, full_in_s) if limit > 0 else None


@dataclass(frozen=True)
class Seen:
    """What one answer said of the endpoint's limits; `age_s`: since its request was sent."""

    requests: Limit | None
    tokens: Limit | None
    age_s: float = 0.0
    hold_s: float | None = None  # a 429's Retry-After, when it reported no limits

    @classmethod
    def of(
        cls, headers: Mapping[str, str], rate_limited: bool, retry_after_s: float | None
    ) -> Seen | None:
        """From an answer's headers (lower-case names); None when they say nothing."""
        requests, tokens = _limit(headers, "requests"), _limit(headers, "tokens")
        hold_s = retry_after_s if rate_limited and not (requests or tokens) else None
        if requests is None and tokens is None and hold_s is None:
            return None
        return cls(requests, tokens, 0.0, hold_s)


NOTHING_SEEN = Seen(None, None)


class PacingArgs(NamedTuple):
    """pacing.lua: a call takes its share of an endpoint's limits (None: nothing to say)."""

    state: str  # key: keys.pacing
    rpm: int
    tpm: int
    rq_limit: int | None
    rq_remaining: int | None
    rq_full_in: float | None
    tk_limit: int | None
    tk_remaining: int | None
    tk_full_in: float | None
    age_s: float
    hold_s: float | None
    tokens: int | None  # None: only learn
    max_wait_s: float


PACING = LuaScript("pacing.lua", PacingArgs, lambda answer: list(answer), keys=("state",))


@dataclass(frozen=True)
class Turn:
    """The answer to a call asking for its share: whether any limit is known, whether the
    share was taken, and the seconds to wait before sending (or that it would need)."""

    known: bool
    taken: bool
    wait_s: float


class Pacing:
    """The shared buckets of the upstream endpoints, over one Redis."""

    def __init__(self, client: Any, rpm: int, tpm: int) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._script = PACING.on(client)

    def take(
        self, endpoint_id: str, tokens: int, max_wait_s: float, seen: Seen | None = None
    ) -> Turn:
        """Take one request and `tokens` for a call, unless it would wait over `max_wait_s`;
        `seen` (the last answer's limits) corrects the buckets first."""
        answer = self._run(endpoint_id, seen, tokens, max(0.0, max_wait_s))
        return Turn(bool(answer[2]), bool(answer[0]), int(answer[1]) / 1000)

    def learn(self, endpoint_id: str, seen: Seen) -> None:
        """Correct the buckets by what an answer said (a 429: at once, for every worker)."""
        self._run(endpoint_id, seen, None, 0)

    def _run(
        self, endpoint_id: str, seen: Seen | None, tokens: int | None, max_wait_s: float
    ) -> list[Any]:
        seen = seen or NOTHING_SEEN
        rq, tk = seen.requests, seen.tokens
        return self._script(
            state=keys.pacing(endpoint_id),
            rpm=self.rpm,
            tpm=self.tpm,
            rq_limit=rq.limit if rq else None,
            rq_remaining=rq.remaining if rq else None,
            rq_full_in=rq.full_in_s if rq else None,
            tk_limit=tk.limit if tk else None,
            tk_remaining=tk.remaining if tk else None,
            tk_full_in=tk.full_in_s if tk else None,
            age_s=seen.age_s,
            hold_s=seen.hold_s,
            tokens=tokens,
            max_wait_s=max_wait_s,
        )
