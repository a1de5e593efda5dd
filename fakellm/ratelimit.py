"""Requests- and tokens-per-minute limits, enforced and reported as OpenAI does.

Each limit is a bucket holding `limit` that refills continuously, `limit` per window (60 s;
a smaller window makes a test's minute shorter). A request takes one request and its tokens
(prompt words plus `max_tokens`, or DEFAULT_OUTPUT_TOKENS), counted when it arrives. Every
answer carries `x-ratelimit-*` headers; a request that does not fit gets `429` with OpenAI's
error body, `Retry-After` and `retry-after-ms`, and takes nothing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from fakellm.errors import ApiError

# OpenAI reserves the model's whole output when no max_tokens is given; we reserve this.
DEFAULT_OUTPUT_TOKENS = 1024


def go_duration(seconds: float) -> str:
    """A duration in OpenAI's header notation (Go's): `0s`, `120ms`, `1.5s`, `6m0s`."""
    ms = max(0, math.ceil(seconds * 1000))
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    minutes, rest_ms = divmod(ms, 60_000)
    text = f"{rest_ms / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{minutes}m{text}" if minutes else text


@dataclass
class Bucket:
    """One limit: how much is left at `at` (monotonic seconds) of `limit` per `window_s`."""

    limit: int
    window_s: float
    level: float = 0.0
    at: float = 0.0

    def refill(self, now: float) -> None:
        """Bring the level up to `now`."""
        rate_per_s = self.limit / self.window_s
        self.level = min(float(self.limit), self.level + (now - self.at) * rate_per_s)
        self.at = now

    def wait_s(self, amount: int) -> float:
        """Seconds until `amount` fits (0: it fits now)."""
        return max(0.0, (amount - self.level) * self.window_s / self.limit)

    def full_in_s(self) -> float:
        """Seconds until the bucket is full again (OpenAI's `x-ratelimit-reset-*`)."""
        return (self.limit - self.level) * self.window_s / self.limit


class RateLimits:
    """The server's RPM and TPM (0: that limit is off)."""

    def __init__(self, rpm: int = 0, tpm: int = 0, window_s: float = 60.0) -> None:
        self.set(rpm, tpm, window_s)

    def set(self, rpm: int, tpm: int, window_s: float) -> None:
        """New limits, with full buckets."""
        now = time.monotonic()
        self.window_s = window_s
        self.buckets = {
            kind: Bucket(limit, window_s, float(limit), now)
            for kind, limit in (("requests", rpm), ("tokens", tpm))
            if limit > 0
        }

    def describe(self) -> dict[str, float]:
        """The limits as `GET /limits` shows them."""
        limits = {kind: b.limit for kind, b in self.buckets.items()}
        return {
            "rpm": limits.get("requests", 0),
            "tpm": limits.get("tokens", 0),
            "window_s": self.window_s,
        }

    def admit(self, tokens: int) -> dict[str, str]:
        """Take one request of `tokens` and answer the headers; raise a 429 if it does not fit."""
        now = time.monotonic()
        wants = {"requests": 1, "tokens": tokens}
        for bucket in self.buckets.values():
            bucket.refill(now)
        waits = {kind: b.wait_s(wants[kind]) for kind, b in self.buckets.items()}
        over = [kind for kind, wait_s in waits.items() if wait_s > 0]
        if not over:
            for kind, bucket in self.buckets.items():
                bucket.level -= wants[kind]
            return self.headers()
        kind = max(over, key=lambda k: waits[k])
        raise self._refusal(kind, wants[kind], waits[kind])

    def headers(self) -> dict[str, str]:
        """OpenAI's `x-ratelimit-*` headers for the limits in force."""
        out: dict[str, str] = {}
        for kind, bucket in self.buckets.items():
            out[f"x-ratelimit-limit-{kind}"] = str(bucket.limit)
            out[f"x-ratelimit-remaining-{kind}"] = str(max(0, math.floor(bucket.level)))
            out[f"x-ratelimit-reset-{kind}"] = go_duration(bucket.full_in_s())
        return out

    def _refusal(self, kind: str, wanted: int, wait_s: float) -> ApiError:
        bucket = self.buckets[kind]
        unit = "RPM" if kind == "requests" else "TPM"
        used = bucket.limit - max(0, math.floor(bucket.level))
        message = (
            f"Rate limit reached for fake in organization org-fake on {kind} per min ({unit}): "
            f"Limit {bucket.limit}, Used {used}, Requested {wanted}. "
            f"Please try again in {go_duration(wait_s)}."
        )
        headers = {
            **self.headers(),
            "Retry-After": str(max(1, math.ceil(wait_s))),
            "retry-after-ms": str(math.ceil(wait_s * 1000)),
        }
        return ApiError(429, message, code="rate_limit_exceeded", kind=kind, headers=headers)
