"""Admission control: per-key request rates (CHATQ_RATE_LIMIT, every /v1 request), per-key
limits and budgets of the chat requests that make jobs (CHATQ_KEY_*: requests and tokens per
minute, tokens per day and month, answered with OpenAI's x-ratelimit-* headers), and a cap
on queue depth."""

from __future__ import annotations

import math
import time
from typing import Any

import redis
from flask import Response, g
from limits import RateLimitItem, parse_many
from limits.storage import RedisClusterStorage, RedisStorage, Storage
from limits.strategies import SlidingWindowCounterRateLimiter
from prometheus_client import Counter

from chatq import metrics as queue_stats
from chatq.admission import (
    ADMITTED,
    HELD,
    QUOTA_REFUSALS,
    RATE_REFUSALS,
    TOO_LARGE,
    Limits,
    Window,
    duration_text,
)
from chatq.broker import Broker, RedisBroker
from chatq.chat import count_prompt_tokens
from chatq.config import ConfigError, Settings
from chatq.errors import ApiError
from chatq.scripting import is_cluster
from chatq.topology import state_url, tls_options
from web import http, metrics
from web.admission.depth import QueueDepth

MAX_RETRY_AFTER_S = 60
# Requests refused by a key's limits, by key name (never the key) and why.
KEY_REJECTIONS = Counter(
    "chatq_key_rejections_total",
    "Chat requests refused by their key's limits or budgets",
    ["key", "reason"],
)
REASONS = {
    "requests": "requests_per_minute",
    "tokens": "tokens_per_minute",
    TOO_LARGE: "request_too_large",
    "day": "daily_budget",
    "month": "monthly_budget",
}
# The queue depth a submit sees is read at most this long ago (web/admission/depth.py)...
DEPTH_MAX_AGE_S = 0.1
# ... by a reader that goes on reading it until this long after the last submit.
DEPTH_KEEP_S = 5.0


def _parse(limit: str, name: str) -> list[RateLimitItem]:
    try:
        return list(parse_many(limit))
    except ValueError as exc:
        raise ConfigError(f"{name}: {limit!r} is not a rate limit like 600/minute") from exc


def _storage(settings: Settings, client: redis.Redis) -> Storage:
    """The rate limiter's counters, where the job store is (a Cluster if it is one)."""
    url = state_url(settings)
    tls = tls_options(url, settings.redis_ca_file)
    if settings.redis_sentinels and not settings.state_url:
        # Behind Sentinel: the job store's own pool, which follows the primary.
        pool = client.connection_pool
        return RedisStorage(url, key_prefix="chatq:ratelimit", connection_pool=pool)
    if is_cluster(client):
        uri = url.split("://", 1)[1]
        return RedisClusterStorage(
            f"redis+cluster://{uri}",
            key_prefix="chatq:ratelimit",
            socket_timeout=5.0,
            socket_connect_timeout=1.0,
            **tls,
        )
    return RedisStorage(
        url, key_prefix="chatq:ratelimit", socket_timeout=5.0, socket_connect_timeout=1.0, **tls
    )


class Admission:
    """Says "not now, retry in N s" before a request adds load the system cannot take."""

    def __init__(
        self, settings: Settings, client: redis.Redis, broker: Broker | None = None
    ) -> None:
        self.redis = client
        self.broker = broker or RedisBroker(client)
        self.max_queue_depth = settings.max_queue_depth
        limit = settings.rate_limit
        self.default = _parse(limit, "CHATQ_RATE_LIMIT") if limit else []
        self.overrides = {
            name: _parse(limit, "CHATQ_RATE_LIMIT_OVERRIDES")
            for name, limit in settings.rate_limit_overrides
        }
        self.depth = QueueDepth(self.broker.total_depth, DEPTH_MAX_AGE_S, DEPTH_KEEP_S)
        self.limiter: SlidingWindowCounterRateLimiter | None = None
        if self.default or self.overrides:
            self.limiter = SlidingWindowCounterRateLimiter(_storage(settings, client))
        self.limits = Limits(client, settings)

    def check_rate(self, owner: str) -> None:
        """429 with Retry-After when `owner` is over its request rate."""
        if self.limiter is None:
            return
        for item in self.overrides.get(owner, self.default):
            if not self.limiter.hit(item, owner):
                reset_at = self.limiter.get_window_stats(item, owner).reset_time
                metrics.ADMISSION_REJECTIONS.labels("rate_limited").inc()
                raise ApiError(
                    429,
                    "rate_limit_exceeded",
                    f"Rate limit of {item} exceeded for this key.",
                    type_="requests",
                    retry_after_s=max(1, math.ceil(reset_at - time.time())),
                )

    def check_queue(self) -> None:
        """503 queue_full with a Retry-After from the drain rate when the queue is too deep."""
        if self.max_queue_depth <= 0:
            return
        depth = self.depth.get()
        if depth < self.max_queue_depth:
            return
        drain = queue_stats.window(self.redis).done_rate_per_s
        excess = depth - self.max_queue_depth + 1
        wait_s = math.ceil(excess / drain) if drain > 0 else MAX_RETRY_AFTER_S
        metrics.ADMISSION_REJECTIONS.labels("queue_full").inc()
        raise ApiError(
            503,
            "queue_full",
            f"The queue holds {depth} jobs; retry later.",
            type_="server_error",
            retry_after_s=min(MAX_RETRY_AFTER_S, max(1, wait_s)),
        )

    def admit(
        self,
        owner: str,
        job_id: str,
        request: dict[str, Any],
        prompt_tokens: int | None,
        cached: bool,
    ) -> bool:
        """Charge the request that makes job `job_id` to its key's limits: 429 when over a
        minute's limit or a budget. Whether tokens are now held for the job (its end
        corrects them; if it is not made after all, `release` it)."""
        if not self.limits.enabled:
            return False
        if prompt_tokens is None:
            prompt_tokens = count_prompt_tokens(request)
        cost = 0 if cached else self.limits.cost(request, prompt_tokens)
        window = self._charge(owner, job_id, cost, prompt_tokens)
        return window.verdict == ADMITTED and cost > 0

    def charge_request(self, owner: str, ref: str) -> None:
        """Charge one request that costs no tokens (a webhook replay, `ref` its id) to its
        key's limits: 429 when over them."""
        if self.limits.enabled:
            self._charge(owner, ref, 0, 0)

    def _charge(self, owner: str, ref: str, cost: int, prompt_tokens: int) -> Window:
        window = self.limits.admit(owner, ref, cost, prompt_tokens)
        g.chatq_limits = window
        if window.verdict in (ADMITTED, HELD):
            return window
        KEY_REJECTIONS.labels(owner, REASONS[window.verdict]).inc()
        quota = window.verdict in QUOTA_REFUSALS
        metrics.ADMISSION_REJECTIONS.labels("insufficient_quota" if quota else "rate_limited").inc()
        raise refusal(owner, window, cost)

    def release(self, owner: str, job_id: str) -> None:
        """The request charged for `job_id` made no job: it used nothing."""
        self.limits.settle(owner, job_id, "exact", 0)


def refusal(owner: str, window: Window, cost: int) -> ApiError:
    """The 429 of a request over one of its key's limits (its headers: `rate_headers`)."""
    lim, verdict = window.limits, window.verdict
    if verdict in QUOTA_REFUSALS:
        day = verdict == "day"
        period, budget = (
            ("today (UTC)", lim.tokens_per_day)
            if day
            else ("this month (UTC)", lim.tokens_per_month)
        )
        used = window.day_tokens if day else window.month_tokens
        renews = "at 00:00 UTC" if day else "on the first of the month, 00:00 UTC"
        return ApiError(
            429,
            "insufficient_quota",
            f"Key {owner} has used or reserved {used} of its {budget} tokens "
            f"{period}; this request may use up to {cost}. The budget renews "
            f"{renews}.",
            type_="insufficient_quota",
        )
    if verdict == TOO_LARGE:
        return ApiError(
            429,
            "rate_limit_exceeded",
            f"Request too large for key {owner} on tokens per minute (TPM): limit "
            f"{lim.tokens_per_minute}, requested {cost}. Ask for fewer output "
            "tokens (max_tokens) or send a shorter prompt.",
            type_="tokens",
        )
    if verdict == "tokens":
        what = (
            f"tokens per minute (TPM): limit {lim.tokens_per_minute}, remaining "
            f"{window.remaining_tokens}, requested {cost}"
        )
    else:
        what = f"requests per minute (RPM): limit {lim.requests_per_minute}, remaining 0"
    return ApiError(
        429,
        "rate_limit_exceeded",
        f"Rate limit reached for key {owner} on {what}. Please try again in "
        f"{duration_text(window.wait_s)}.",
        type_=verdict,
        retry_after_s=max(1, math.ceil(window.wait_s)),
    )


def rate_headers(window: Window) -> dict[str, str]:
    """OpenAI's x-ratelimit-* headers of the key's minute limits (those it has); on a
    refusal, `retry-after-ms` when a retry will pass, else `x-should-retry: false`."""
    lim, headers = window.limits, {}
    of_requests = (lim.requests_per_minute, window.remaining_requests, window.requests_full_in_s)
    of_tokens = (lim.tokens_per_minute, window.remaining_tokens, window.tokens_full_in_s)
    for names, (limit, remaining, full_in_s) in (
        (http.REQUEST_LIMITS, of_requests),
        (http.TOKEN_LIMITS, of_tokens),
    ):
        if limit:
            headers[names.limit.name] = str(limit)
            headers[names.remaining.name] = str(remaining)
            headers[names.reset.name] = duration_text(full_in_s)
    if window.verdict in RATE_REFUSALS:
        headers[http.RETRY_AFTER_MS.name] = str(math.ceil(window.wait_s * 1000))
    elif window.verdict in QUOTA_REFUSALS or window.verdict == TOO_LARGE:
        headers[http.SHOULD_RETRY.name] = "false"  # the OpenAI SDKs retry any other 429
    return headers


def add_rate_headers(response: Response) -> Response:
    """After a request its key's limits admitted or refused: their headers on the answer."""
    window: Window | None = g.get("chatq_limits")
    if window is not None:
        response.headers.update(rate_headers(window))
    return response
