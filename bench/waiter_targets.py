"""Parked waiters and followers: how many one web process holds, how fast they wake, what
each costs in memory, and token latency through the events long-poll and SSE."""

from __future__ import annotations

from bench.rows import JSON, Row, dig, fmt, level, missing


def _row(measure: str, target: str, reached: str, met: bool | None) -> Row:
    return Row(measure, target, reached, met, 12)


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


def wake_throughput(s: JSON) -> list[Row]:
    """Wakes per second of one web process, all jobs ended at once."""
    burst = dig(s, "waiters", "burst")
    measure, target = "wake throughput per web process", "≥ 2,500/s"
    if not burst:
        return [missing(measure, target, 12)]
    return [
        _row(
            measure,
            target,
            f"{burst['wakes_per_s']:,}/s over {burst['waiters']:,} waiters "
            f"(finishes issued at {burst['finishes_per_s']:,}/s)",
            burst["wakes_per_s"] >= 2500,
        )
    ]


def waiters_rss(s: JSON) -> list[Row]:
    """10,000 parked waiters in one web process: RSS; the per-waiter KiB beside it."""
    measure, target = "10,000 parked waiters, web RSS", "≤ 300 MiB"
    lv = level(dig(s, "waiters", "levels"), "waiters", 10000)
    kib = dig(s, "waitermem", "kib_per_waiter")
    traced = (
        f"; tracemalloc {kib} KiB per waiter over {s['waitermem']['waiters']:,}"
        if kib is not None
        else ""
    )
    if lv is None:
        return [missing(measure, target, 12, "not measured in this run" + traced)]
    return [
        _row(
            measure,
            target,
            f"{lv['rss_parked_mib']} MiB (base {lv['rss_before_mib']}, "
            f"{lv['kib_per_waiter']} KiB/waiter by RSS), {lv['errors']} errors{traced}",
            lv["rss_parked_mib"] <= 300 and lv["errors"] == 0,
        )
    ]


def tokens(s: JSON) -> list[Row]:
    """Token latency p99 through the events long-poll and through SSE."""
    tok = dig(s, "tokens")
    measure = "token latency, 100 streams x 10 tokens/s, p99 (events long-poll; SSE)"
    target = "≤ 50 ms both"
    if not tok or "sse" not in tok:
        return [missing(measure, target, 12)]
    p99 = {via: dig(tok, via, "latency", "p99_ms") for via in ("events", "sse")}
    seen = all(tok[v]["tokens_seen"] == tok[v]["tokens_expected"] for v in ("events", "sse"))
    if tok["streams"] != 100:
        measure += f" (run with {tok['streams']} streams)"
    return [
        _row(
            measure,
            target,
            f"events {fmt(p99['events'])} ms; SSE {fmt(p99['sse'])} ms"
            + _steady_p99(tok)
            + ("" if seen else " (tokens missing)"),
            None if None in p99.values() else all(v <= 50 for v in p99.values()) and seen,
        )
    ]


def _steady_p99(tok: JSON) -> str:
    """The p99 after each stream's first half second, when measured."""
    steady = {via: dig(tok, via, "steady_latency", "p99_ms") for via in ("events", "sse")}
    if None in steady.values():
        return ""
    return (
        f" (after each stream's first 0.5 s: events {fmt(steady['events'])} ms, "
        f"SSE {fmt(steady['sse'])} ms)"
    )


def e2e_wake(s: JSON) -> list[Row]:
    """End-to-end wake: long-polls on jobs a real worker ends, receive - `completed_at`."""
    levels = dig(s, "e2ewake", "levels") or []
    if not levels:
        return [missing("end-to-end wake, real worker", "p99 ≤ 10 ms, every run", 37)]
    rows = []
    for lv in levels:
        measure = f"end-to-end wake, {lv['waiters']:,} waiters, real worker"
        if lv["p99_ms_worst"] is None:
            rows.append(missing(measure, "p99 ≤ 10 ms, every run", 37))
            continue
        p50s = [r["wake"]["p50_ms"] for r in lv["runs"] if r["wake"]["p50_ms"] is not None]
        rows.append(
            Row(
                measure,
                "p99 ≤ 10 ms, every run",
                f"p99 median {fmt(lv['p99_ms_median'])} ms, worst {fmt(lv['p99_ms_worst'])} ms "
                f"over {len(lv['runs'])} runs (p50 {fmt(min(p50s))} to {fmt(max(p50s))} ms), "
                f"{lv['errors']} errors",
                lv["p99_ms_worst"] <= 10 and lv["errors"] == 0,
                37,
            )
        )
    return rows
