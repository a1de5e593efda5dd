"""The longest garbage-collector pause, bounded by `chatq_gc_pause_seconds`'s buckets (or
by `chatq_gc_pause_cpu_seconds`', the CPU time of the same collections).

A histogram keeps counts per bucket, not its largest sample: between two readings the
longest pause lies above the highest bucket bound that some pause exceeded and at or below
the lowest bound that every pause stayed within. That interval is what is reported.
"""

from __future__ import annotations

import math
import re

import requests

METRIC = "chatq_gc_pause_seconds"
CPU_METRIC = "chatq_gc_pause_cpu_seconds"
METRICS = (METRIC, CPU_METRIC)
TARGET_S = 0.05  # issue 12: no pause longer than this
_BUCKET = re.compile(r"(?P<metric>\w+)_bucket\{(?P<labels>[^}]*)\} (?P<n>\S+)$")
Buckets = dict[float, float]


def parse(metrics_text: str, metric: str = METRIC) -> Buckets:
    """Cumulative pause counts of `metric` by upper bound (s), all generations summed."""
    out: Buckets = {}
    for line in metrics_text.splitlines():
        m = _BUCKET.match(line)
        if not m or m.group("metric") != metric:
            continue
        le = m.group("labels").split('le="', 1)[1].split('"', 1)[0]
        bound = math.inf if le == "+Inf" else float(le)
        out[bound] = out.get(bound, 0.0) + float(m.group("n"))
    return out


def fetch(url: str, timeout_s: float = 10.0) -> str | None:
    """The text served at a /metrics URL, or None when it cannot be read."""
    try:
        return requests.get(url, timeout=timeout_s).text
    except requests.RequestException:
        return None


def read(url: str, timeout_s: float = 10.0) -> Buckets | None:
    """The pauses' buckets served at a /metrics URL, or None when it cannot be read."""
    text = fetch(url, timeout_s)
    return None if text is None else parse(text)


def longest(before: Buckets | None, after: Buckets | None) -> dict[str, float | int | None]:
    """Bounds of the longest pause between two readings: (above_s, at_most_s]; how many
    pauses there were, and how many of them were longer than TARGET_S."""
    if after is None:
        return {"pauses": None, "above_s": None, "at_most_s": None, "over_target": None}
    before = before or {}
    bounds = sorted(after)
    delta = {b: after[b] - before.get(b, 0.0) for b in bounds}
    total = delta.get(math.inf, 0.0)
    if total <= 0:
        return {"pauses": 0, "above_s": None, "at_most_s": 0.0, "over_target": 0}
    within = [b for b in bounds if delta[b] >= total]
    exceeded = [b for b in bounds if delta[b] < total]
    at_most = within[0] if within else math.inf
    return {
        "pauses": int(total),
        "above_s": max(exceeded, default=0.0),
        "at_most_s": None if at_most == math.inf else at_most,
        "over_target": int(total - delta.get(TARGET_S, 0.0)),
    }


def describe(bound: dict[str, float | int | None]) -> str:
    """`0.025-0.05 s over 1,234 pauses (2 over 0.05 s)`, or why there is no figure."""
    if bound["pauses"] is None:
        return "not read"
    if not bound["pauses"]:
        return "no pause"
    upper = bound["at_most_s"]
    span = f"> {bound['above_s']:g} s" if upper is None else f"{bound['above_s']:g}-{upper:g} s"
    over = f" ({bound['over_target']:,} over {TARGET_S:g} s)" if "over_target" in bound else ""
    return f"{span} over {bound['pauses']:,} pauses{over}"
