"""Every target judged from one run: issue 12's table first (bench/targets12.py, and the
soak rows of bench/soakrows.py), then the earlier issues' targets it does not restate."""

from __future__ import annotations

from collections.abc import Callable

from bench import bodyrows, soakrows, targets12, targets14
from bench.rows import JSON, Row, dig, fmt, level, missing
from bench.sections import transport

__all__ = ["JSON", "Row", "dig", "evaluate"]


def long_job(s: JSON) -> list[Row]:
    """Requests per long job, chatq against 1 s short polling."""
    target = "≥ 10x fewer requests for a 10 s job"
    lj = dig(s, "compare", "long_job")
    if not lj or not dig(lj, "chatq", "requests_per_job"):
        return [missing("requests per long job", target)]
    a, b = lj["short_poll"]["requests_per_job"] or 0, lj["chatq"]["requests_per_job"]
    return [
        Row(
            f"requests per {lj['job_s']:g} s job",
            target,
            f"{a / b:.1f}x ({b:g} vs {a:g})",
            a / b >= 10 and lj["job_s"] >= 10,
        )
    ]


def waiters_vs_gthread(s: JSON) -> list[Row]:
    """Concurrent waiters per process against AsyncResult.get() under gthread (64 threads)."""
    target = "≥ 150x more, no request queued behind another"
    levels = dig(s, "waiters", "levels") or []
    held = [
        lv["waiters"] + lv["probes"]
        for lv in levels
        if lv["errors"] == 0 and lv["probe"]["answered_in_grace"] == lv["probes"]
    ]
    gthread = dig(s, "gthread", "max_parked")
    if not held or not gthread:
        return [missing("concurrent waiters vs Flask+Celery gthread(64)", target)]
    queued = any(lv["probe"]["answered_in_grace"] < lv["probes"] for lv in levels)
    ratio = max(held) / gthread
    return [
        Row(
            "concurrent waiters vs Flask+Celery gthread(64)",
            target,
            f"{ratio:.0f}x ({max(held):,} vs {gthread}); probes queued: {queued}",
            ratio >= 150 and not queued,
        )
    ]


def wake_latency(s: JSON) -> list[Row]:
    """Wake latency at 1,000 and 10,000 waiters, 500 completions/s."""
    rows = []
    for n, target, ok in (
        (1000, "p50 ≤ 3 ms, p99 ≤ 10 ms", lambda w: w["p50_ms"] <= 3 and w["p99_ms"] <= 10),
        (10000, "p99 ≤ 25 ms", lambda w: w["p99_ms"] <= 25),
    ):
        lv = level(dig(s, "waiters", "levels"), "waiters", n)
        measure = f"wake latency, {n:,} waiters, 500 completions/s"
        if lv is None or lv["wake"]["p50_ms"] is None:
            rows.append(missing(measure, target))
            continue
        w = lv["wake"]
        rows.append(
            Row(
                measure,
                target,
                f"p50 {fmt(w['p50_ms'])} ms, p99 {fmt(w['p99_ms'])} ms, {lv['errors']} errors",
                ok(w) and lv["errors"] == 0,
            )
        )
    return rows


def connections(s: JSON) -> list[Row]:
    """Upstream connections the worker opened over its calls."""
    c = dig(s, "connections")
    target = "≤ concurrency + 5 % over 10,000 calls"
    if not c:
        return [missing("upstream connections", target, 4)]
    return [
        Row(
            "upstream connections",
            target,
            f"{c['connections_opened']:,} over {c['calls']:,} calls "
            f"(limit {c['limit']}, pool {c['worker_concurrency']})",
            c["connections_opened"] <= c["limit"] and c["calls"] >= 10000,
            4,
        )
    ]


def cache_hit(s: JSON) -> list[Row]:
    """Cache hit latency at submit."""
    c = dig(s, "cache")
    target = "p50 ≤ 2 ms server time"
    if not c or c.get("status") != "measured":
        return [
            Row("cache hit at submit", target, "TODO: " + (dig(c, "note") or "not run"), None, 4)
        ]
    server = c.get("server_p50_ms")
    return [
        Row(
            "cache hit at submit",
            target,
            f"server p50 ≈ {fmt(server)} ms (chatq's histogram, interpolated); client-seen "
            f"p50 {fmt(c['client_latency']['p50_ms'])} ms; {c['hits']}/{c['submits']} hits",
            server is not None and server <= 2,
            4,
        )
    ]


def background(s: JSON) -> list[Row]:
    """What a background response adds over a plain job (issue 15): measured, no target."""
    a = dig(s, "background", "added_background")
    measure = "background response over a job (submit + long-poll, one client)"
    if not a:
        return [missing(measure, "measured, no target", 15)]
    return [
        Row(
            measure,
            "measured, no target",
            f"p50 {a['latency_p50_ms']:+} ms, submit {a.get('submit_server_ms', 0):+} ms "
            f"server time, web CPU {a['web_cpu_ms_per_job']:+} ms/job, "
            f"{a['requests_per_job']:+g} round trips",
            None,
            15,
        )
    ]


def batch(s: JSON) -> list[Row]:
    """Issue 16: interactive p99 while a batch runs, against the same system idle: one worker
    serving both lanes, and a worker per lane with the same slots (CHATQ_WORKER_LANES)."""
    b = dig(s, "batch")
    lines = f"{dig(b, 'lines') or 10000:,}-line batch"
    turns = "idle in turns with the batch"
    return [
        _batch_row(b, f"interactive p99 during a {lines} (idle before and after)"),
        _batch_row(dig(b, "worker_per_lane"), f"the same, a worker per lane ({turns})"),
        _batch_row(
            dig(b, "worker_per_lane_idle_class"),
            f"the same, the batch worker in the idle class ({turns})",
        ),
        _batch_row(
            dig(b, "batch_pool_apart"),
            f"the same, the batch worker and an upstream of its own in the idle class ({turns})",
        ),
        _control_row(dig(b, "cpu_burner_control")),
    ]


def _control_row(c: JSON) -> Row:
    """The machine's own floor: a CPU burner in the idle class in turns, no batch."""
    measure = "control: interactive p99 beside a CPU burner in the idle class, in turns"
    burning, idle = dig(c, "burning", "latency"), dig(c, "idle", "latency")
    if not burning or not idle:
        return missing(measure, "— (what any busy process costs here)", 16)
    reached = (
        f"{fmt(burning['p99_ms'], ' ms')} vs {fmt(idle['p99_ms'], ' ms')} idle; p50 "
        f"{fmt(burning['p50_ms'], ' ms')} vs {fmt(idle['p50_ms'], ' ms')}"
    )
    return Row(measure, "— (what any busy process costs here)", reached, None, 16)


def _batch_row(b: JSON, measure: str) -> Row:
    target = "within 20 % of idle"
    idle, busy = (
        dig(b, "interactive_idle", "latency", "p99_ms"),
        dig(b, "interactive_during", "latency", "p99_ms"),
    )
    if idle is None or busy is None:
        return missing(measure, target, 16)
    return Row(
        measure,
        target,
        f"{fmt(busy, ' ms')} vs {fmt(idle, ' ms')} idle "
        f"({dig(b, 'interactive_during', 'latency', 'n')} and "
        f"{dig(b, 'interactive_idle', 'latency', 'n')} probes); {b['lines_per_s']} lines/s, "
        f"first line {b['first_line_s']} s, last {b['last_line_s']} s",
        busy <= 1.2 * idle and b["status"] == "completed",
        16,
    )


EARLIER: list[Callable[[JSON], list[Row]]] = [
    long_job,
    waiters_vs_gthread,
    wake_latency,
    connections,
    cache_hit,
    background,
    batch,
]
JUDGES: list[Callable[[JSON], list[Row]]] = [
    *targets12.JUDGES,
    soakrows.gc_pause,
    soakrows.soak,
    *EARLIER,
    targets14.fairness,
    targets14.pacing,
    bodyrows.bodies,
    transport.judge,
]


def _judged(judge: Callable[[JSON], list[Row]], sections: JSON) -> list[Row]:
    """A judge's rows; a section that failed or lacks a figure gives a row saying so."""
    try:
        return judge(sections)
    except (KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
        doc = (judge.__doc__ or judge.__name__).strip()
        issue = 12 if judge.__module__ in (targets12.__name__, soakrows.__name__) else 6
        return [
            Row(doc, f"see issue {issue}", f"no figure: {type(exc).__name__} {exc}", None, issue)
        ]


def evaluate(sections: JSON) -> list[Row]:
    """Every target row, in issue 6's order."""
    return [row for judge in JUDGES for row in _judged(judge, sections)]
