"""GET /v1/usage: the calling key's limits and use; the same figures of every key in the
web's /metrics (by key name, never a key)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
from flask import Blueprint, Response
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from chatq.admission import Window, duration_text
from chatq.metrics import Bucket, RateLimits, Usage
from chatq.topology import BACKEND_ERRORS
from web.context import Services, authorize, services
from web.http import json_response

bp = Blueprint("usage", __name__, url_prefix="/v1")


def _rate_limits(window: Window) -> RateLimits:
    """The minute's limits, named as OpenAI's x-ratelimit-* headers; null where none."""
    body: dict[str, Any] = {}
    lim = window.limits
    for kind, limit, remaining, full_in_s in (
        ("requests", lim.requests_per_minute, window.remaining_requests, window.requests_full_in_s),
        ("tokens", lim.tokens_per_minute, window.remaining_tokens, window.tokens_full_in_s),
    ):
        body[f"limit_{kind}"] = limit or None
        body[f"remaining_{kind}"] = remaining if limit else None
        body[f"reset_{kind}"] = duration_text(full_in_s) if limit else None
    return RateLimits(**body)


def _bucket(start: int, end: int, tokens: int, requests: int, budget: int) -> Bucket:
    """One period's use, in the shape of OpenAI's usage buckets, with its budget."""
    left = max(0, budget - tokens) if budget else None
    return Bucket("bucket", start, end, requests, tokens, budget or None, left)


def usage_body(owner: str, window: Window) -> dict[str, Any]:
    """The /v1/usage object of key name `owner`."""
    lim = window.limits
    usage = Usage(
        object="usage",
        key=owner,
        rate_limits=_rate_limits(window),
        day=_bucket(
            window.day_start,
            window.day_end,
            window.day_tokens,
            window.day_requests,
            lim.tokens_per_day,
        ),
        month=_bucket(
            window.month_start,
            window.month_end,
            window.month_tokens,
            window.month_requests,
            lim.tokens_per_month,
        ),
        reserved_tokens=window.reserved_tokens,
    )
    return msgspec.to_builtins(usage)  # type: ignore[no-any-return]


@bp.get("/usage")
def usage() -> Response:
    """The calling key's limits, and its use this minute, today and this month."""
    svc = services()
    owner = authorize(svc)
    [window] = svc.admission.limits.peek([owner])
    return json_response(usage_body(owner, window))


class UsageCollector(Collector):
    """Every key's use and budgets, read from Redis at scrape time (with limits on)."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Tokens used and budgets by key and period, reserved tokens, what is left of the
        minute's limits."""
        limits = self.svc.admission.limits
        owners = sorted({name for name, _ in self.svc.settings.api_keys})
        if not limits.enabled or not owners:
            return
        try:
            windows = limits.peek(owners)
        except BACKEND_ERRORS:
            return
        used = GaugeMetricFamily(
            "chatq_key_tokens_used",
            "Tokens a key has used (ended jobs) or holds (jobs not ended) this UTC day or month",
            labels=["key", "period"],
        )
        budget = GaugeMetricFamily(
            "chatq_key_token_budget",
            "A key's token budget of the UTC day or month (only those set)",
            labels=["key", "period"],
        )
        reserved = GaugeMetricFamily(
            "chatq_key_tokens_reserved", "Tokens held by a key's jobs not yet ended", labels=["key"]
        )
        left = GaugeMetricFamily(
            "chatq_key_ratelimit_remaining",
            "What is left of a key's per-minute limits (only those set)",
            labels=["key", "kind"],
        )
        for owner, w in zip(owners, windows, strict=True):
            _add_key(owner, w, used, budget, reserved, left)
        yield from (used, budget, reserved, left)


def _add_key(
    owner: str,
    w: Window,
    used: GaugeMetricFamily,
    budget: GaugeMetricFamily,
    reserved: GaugeMetricFamily,
    left: GaugeMetricFamily,
) -> None:
    lim = w.limits
    for period, tokens, limit in (
        ("day", w.day_tokens, lim.tokens_per_day),
        ("month", w.month_tokens, lim.tokens_per_month),
    ):
        used.add_metric([owner, period], tokens)
        if limit:
            budget.add_metric([owner, period], limit)
    reserved.add_metric([owner], w.reserved_tokens)
    if lim.requests_per_minute:
        left.add_metric([owner, "requests"], w.remaining_requests)
    if lim.tokens_per_minute:
        left.add_metric([owner, "tokens"], w.remaining_tokens)
