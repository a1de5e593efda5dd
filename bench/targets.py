"""The targets of issue 6 (and the figures issues 3 and 4 ask for), judged from one run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

JSON = dict[str, Any]


@dataclass
class Row:
    """One line of the results table; `met` is None when there is no target or no figure."""

    measure: str
    target: str
    reached: str
    met: bool | None

    def as_dict(self) -> JSON:
        """A JSON-ready copy."""
        return asdict(self)


def dig(data: Any, *path: Any) -> Any:
    """data[p0][p1]…, or None as soon as a step is missing."""
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _level(levels: list[JSON] | None, key: str, value: Any) -> JSON | None:
    return next((lv for lv in levels or [] if lv.get(key) == value), None)


def _missing(measure: str, target: str) -> Row:
    return Row(measure, target, "not measured in this run", None)


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "—"
    return f"{x:,.1f}{unit}" if isinstance(x, float) else f"{x:,}{unit}"


def short_poll(s: JSON) -> list[Row]:
    """Added latency and requests per long job, chatq against 1 s short polling."""
    t1, t2 = "≥ 100x lower, chatq p50 ≤ 5 ms", "≥ 10x fewer requests for a 10 s job"
    sp = dig(s, "compare", "systems", "short_poll_1s", "levels", 0, "latency", "p50_ms")
    cq = dig(s, "compare", "systems", "chatq_longpoll", "levels", 0, "latency", "p50_ms")
    rows = []
    if sp is None or cq is None:
        rows.append(_missing("added latency vs 1 s short polling (p50, lowest load)", t1))
    else:
        ratio = sp / max(cq, 0.001)
        rows.append(Row("added latency vs 1 s short polling (p50, lowest load)", t1,
                        f"{ratio:.0f}x ({_fmt(cq, ' ms')} vs {_fmt(sp, ' ms')})",
                        ratio >= 100 and cq <= 5))
    lj = dig(s, "compare", "long_job")
    if not lj or not dig(lj, "chatq", "requests_per_job"):
        return [*rows, _missing("requests per long job", t2)]
    a, b = lj["short_poll"]["requests_per_job"] or 0, lj["chatq"]["requests_per_job"]
    rows.append(Row(f"requests per {lj['job_s']:g} s job", t2,
                    f"{a / b:.1f}x ({b:g} vs {a:g})", a / b >= 10 and lj["job_s"] >= 10))
    return rows


def waiters_vs_gthread(s: JSON) -> list[Row]:
    """Concurrent waiters per process against AsyncResult.get() under gthread (64 threads)."""
    target = "≥ 150x more, no request queued behind another"
    levels = dig(s, "waiters", "levels") or []
    held = [lv["waiters"] + lv["probes"] for lv in levels
            if lv["errors"] == 0 and lv["probe"]["answered_in_grace"] == lv["probes"]]
    gthread = dig(s, "gthread", "max_parked")
    if not held or not gthread:
        return [_missing("concurrent waiters vs Flask+Celery gthread(64)", target)]
    queued = any(lv["probe"]["answered_in_grace"] < lv["probes"] for lv in levels)
    ratio = max(held) / gthread
    return [Row("concurrent waiters vs Flask+Celery gthread(64)", target,
                f"{ratio:.0f}x ({max(held):,} vs {gthread}); probes queued: {queued}",
                ratio >= 150 and not queued)]


def wake_latency(s: JSON) -> list[Row]:
    """Wake latency at 1,000 and 10,000 waiters, 500 completions/s."""
    rows = []
    for n, target, ok in (
        (1000, "p50 ≤ 3 ms, p99 ≤ 10 ms", lambda w: w["p50_ms"] <= 3 and w["p99_ms"] <= 10),
        (10000, "p99 ≤ 25 ms", lambda w: w["p99_ms"] <= 25),
    ):
        lv = _level(dig(s, "waiters", "levels"), "waiters", n)
        measure = f"wake latency, {n:,} waiters, 500 completions/s"
        if lv is None or lv["wake"]["p50_ms"] is None:
            rows.append(_missing(measure, target))
            continue
        w = lv["wake"]
        rows.append(Row(measure, target, f"p50 {_fmt(w['p50_ms'])} ms, p99 {_fmt(w['p99_ms'])}"
                        f" ms, {lv['errors']} errors", ok(w) and lv["errors"] == 0))
    return rows


def wake_throughput(s: JSON) -> list[Row]:
    """Wakes per second of one web process, all jobs ended at once."""
    burst = dig(s, "waiters", "burst")
    target = "≥ 2,000/s"
    if not burst:
        return [_missing("wake throughput per web process", target)]
    return [Row("wake throughput per web process", target,
                f"{burst['wakes_per_s']:,}/s over {burst['waiters']:,} waiters "
                f"(finishes issued at {burst['finishes_per_s']:,}/s)",
                burst["wakes_per_s"] >= 2000)]


def waiters_rss(s: JSON) -> list[Row]:
    """10,000 idle long-polls in one web process: RSS and errors."""
    lv = _level(dig(s, "waiters", "levels"), "waiters", 10000)
    target = "10,000 with RSS ≤ 300 MiB and 0 errors"
    if lv is None:
        return [_missing("concurrent waiters per web process", target)]
    return [Row("concurrent waiters per web process", target,
                f"{lv['waiters']:,}: RSS {lv['rss_parked_mib']} MiB (base {lv['rss_before_mib']}"
                f", {lv['kib_per_waiter']} KiB/waiter), {lv['errors']} errors",
                lv["rss_parked_mib"] <= 300 and lv["errors"] == 0)]


def throughput(s: JSON) -> list[Row]:
    """Instant upstream against bare Celery; the 1 s streaming upstream."""
    t = dig(s, "throughput")
    if not t:
        return [_missing("throughput", "see issue 6")]
    inst = t["instant"]["jobs_per_s"]
    stream, flight = t["streaming_1s"]["jobs_per_s"], t["streaming_1s"]["in_flight"]["mean"]
    return [
        Row("throughput, instant upstream, 1 web + 1 worker", "≥ 60 % of bare Celery",
            f"{inst} jobs/s = {t['instant_vs_bare_pct']} % of {t['bare_celery_best_jobs_per_s']}"
            " (bare Celery, own result writes)", t["instant_vs_bare_pct"] >= 60),
        Row("throughput, 1 s streaming upstream", "≥ 150 jobs/s, ≥ 150 in flight per worker",
            f"{stream} jobs/s, {flight} in flight (mean)",
            (stream or 0) >= 150 and (flight or 0) >= 150),
    ]


def gateway(s: JSON) -> list[Row]:
    """chatq's front door against fakellm direct at 50 jobs/s."""
    p = _level(dig(s, "gateway", "points"), "rate_per_s", 50)
    target = "p50 ≤ 5 ms, p99 ≤ 25 ms"
    if p is None or p["overhead"]["p50_ms"] is None:
        return [_missing("gateway overhead at 50 jobs/s", target)]
    o = p["overhead"]
    return [Row("gateway overhead at 50 jobs/s", target,
                f"p50 +{_fmt(o['p50_ms'])} ms, p99 +{_fmt(o['p99_ms'])} ms",
                o["p50_ms"] <= 5 and o["p99_ms"] <= 25 and p["chatq"]["errors"] == 0)]


def connections(s: JSON) -> list[Row]:
    """Upstream connections the worker opened over its calls."""
    c = dig(s, "connections")
    target = "≤ concurrency + 5 % over 10,000 calls"
    if not c:
        return [_missing("upstream connections", target)]
    return [Row("upstream connections", target,
                f"{c['connections_opened']:,} over {c['calls']:,} calls "
                f"(limit {c['limit']}, pool {c['worker_concurrency']})",
                c["connections_opened"] <= c["limit"] and c["calls"] >= 10000)]


def cache_hit(s: JSON) -> list[Row]:
    """Cache hit latency at submit."""
    c = dig(s, "cache")
    target = "p50 ≤ 2 ms server time"
    if not c or c.get("status") != "measured":
        return [Row("cache hit at submit", target, "TODO: " + (dig(c, "note") or "not run"),
                    None)]
    server = c.get("server_p50_ms")
    return [Row("cache hit at submit", target,
                f"server p50 ≈ {_fmt(server)} ms (chatq's histogram, interpolated); client-seen "
                f"p50 {_fmt(c['client_latency']['p50_ms'])} ms; {c['hits']}/{c['submits']} hits",
                server is not None and server <= 2)]


def background(s: JSON) -> list[Row]:
    """What a background response adds over a plain job (issue 15): measured, no target."""
    a = dig(s, "background", "added_background")
    measure = "background response over a job (submit + long-poll, one client)"
    if not a:
        return [_missing(measure, "measured, no target")]
    return [Row(measure, "measured, no target",
                f"p50 {a['latency_p50_ms']:+} ms, submit {a.get('submit_server_ms', 0):+} ms "
                f"server time, web CPU {a['web_cpu_ms_per_job']:+} ms/job, "
                f"{a['requests_per_job']:+g} round trips", None)]


def batch(s: JSON) -> list[Row]:
    """Issue 16: interactive p99 while a batch runs, against the same system idle."""
    b = dig(s, "batch")
    measure = f"interactive p99 during a {dig(b, 'lines') or 10000:,}-line batch"
    target = "within 20 % of idle"
    idle, busy = dig(b, "interactive_idle", "latency", "p99_ms"), dig(
        b, "interactive_during", "latency", "p99_ms")
    if idle is None or busy is None:
        return [_missing(measure, target)]
    return [Row(measure, target,
                f"{_fmt(busy, ' ms')} vs {_fmt(idle, ' ms')} idle; {b['lines_per_s']} lines/s, "
                f"first line {b['first_line_s']} s, last {b['last_line_s']} s",
                busy <= 1.2 * idle and b["status"] == "completed")]


JUDGES: list[Callable[[JSON], list[Row]]] = [
    short_poll, waiters_vs_gthread, wake_latency, wake_throughput, waiters_rss, throughput,
    gateway, connections, cache_hit, background, batch,
]


def _judged(judge: Callable[[JSON], list[Row]], sections: JSON) -> list[Row]:
    """A judge's rows; a section that failed or lacks a figure gives a row saying so."""
    try:
        return judge(sections)
    except (KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
        doc = (judge.__doc__ or judge.__name__).strip()
        return [Row(doc, "see issue 6", f"no figure: {type(exc).__name__} {exc}", None)]


def evaluate(sections: JSON) -> list[Row]:
    """Every target row, in issue 6's order."""
    return [row for judge in JUDGES for row in _judged(judge, sections)]
