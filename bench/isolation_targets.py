"""One client's latency beside another's load: a light tenant beside a flood (fair dispatch,
running caps), interactive jobs beside a batch (a worker per lane), `/healthz` beside a large
body."""

from __future__ import annotations

from bench.rows import JSON, Row, dig, fmt, missing

FAIRNESS_ISSUE = 14
BODIES_ISSUE = 34
BODIES_TARGET = "≤ 50 ms"


def fairness(s: JSON) -> list[Row]:
    """Bob's wait for a slot beside alice's flood of 1 s jobs, against his wait alone."""
    f = dig(s, "fairness")
    if not f:
        return [
            missing("fairness: bob's wait beside a flood", "within 1.5x of alone", FAIRNESS_ISSUE)
        ]
    flood = f"{f['flood_jobs']:,}-job flood"
    return [
        _fair_row(f["fair_capped"], f"light tenant's wait p50 / p99 beside a {flood}, capped"),
        _split_row(f["fair_capped"]),
        _fair_row(f["fair"], "the same, no running cap (a slot must free up first)"),
        _fair_row(f["fifo"], "the same, one FIFO queue (chatq before issue 14)", judged=False),
        *_varied_rows(f.get("fair_capped_varied")),
    ]


def _varied_rows(v: JSON | None) -> list[Row]:
    """The capped stack again, the flood's jobs of 0.5-1.5 s: what its waves cost bob."""
    measure = "the same, capped, the flood's jobs of 0.5-1.5 s (no waves of ends)"
    target = "— (what the waves cost)"
    if not v:
        return [missing(measure, target, FAIRNESS_ISSUE)]
    return [_fair_row(v, measure, judged=False, target=target), _split_row(v, "varied")]


def _fair_row(
    v: JSON, measure: str, judged: bool = True, target: str = "— (the alternative)"
) -> Row:
    alone, during = v["alone"], v["with_flood"]
    reached = (
        f"{during['p50_ms']:g} / {during['p99_ms']:g} ms vs {alone['p50_ms']:g} / "
        f"{alone['p99_ms']:g} ms alone ({v['p50_ratio']:g}x / {v['p99_ratio']:g}x, "
        f"{alone['n']} jobs each)"
    )
    within = all(during[p] <= 1.5 * alone[p] for p in ("p50_ms", "p99_ms"))
    met = within if judged else None
    return Row(measure, "within 1.5x of alone" if judged else target, reached, met, FAIRNESS_ISSUE)


def _split_row(v: JSON, stack: str = "capped") -> Row:
    """Where the capped tail is: bob's jobs made while the flood was being submitted, or after."""
    while_, after = v.get("with_flood_while_submitted"), v.get("with_flood_after_submitted")
    measure = f"the same ({stack}), bob's jobs made while the flood was still submitted / after"
    if not while_ or not after:
        return missing(measure, "— (where the tail is)", FAIRNESS_ISSUE)
    spans = ", ".join(f"{s:g}" for s in v.get("flood_submitted_in_s", []))
    reached = (
        f"{fmt(while_['p50_ms'])} / {fmt(while_['p99_ms'])} ms ({while_['n']} jobs); "
        f"{fmt(after['p50_ms'])} / {fmt(after['p99_ms'])} ms ({after['n']} jobs); "
        f"the flood submitted in {spans} s"
    )
    return Row(measure, "— (where the tail is)", reached, None, FAIRNESS_ISSUE)


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


def bodies(s: JSON) -> list[Row]:
    """The two rows: the upload, then the refused bodies."""
    b = dig(s, "bodies")
    upload_mb = (dig(b, "upload", "bytes") or 200_000_000) / 1e6
    refused_mb = (dig(b, "refused", "body_bytes") or 100_000_000) / 1e6
    return [
        _body_row(b, "upload", f"/healthz p99 during a {upload_mb:,.0f} MB upload (accepted)"),
        _body_row(b, "refused", f"/healthz p99 during {refused_mb:,.0f} MB unauthenticated bodies"),
    ]


def _body_row(b: JSON | None, part: str, measure: str) -> Row:
    healthz, idle = dig(b, part, "healthz"), dig(b, "idle", "healthz")
    if not healthz or healthz["p99_ms"] is None or not idle:
        return missing(measure, BODIES_TARGET, BODIES_ISSUE)
    assert b is not None
    return Row(
        measure,
        BODIES_TARGET,
        f"{fmt(healthz['p99_ms'], ' ms')} (p50 {fmt(healthz['p50_ms'], ' ms')}, max "
        f"{fmt(healthz['max_ms'], ' ms')}, {healthz['n']} probes; idle p99 "
        f"{fmt(idle['p99_ms'], ' ms')}); {_detail(b[part])}; web CPU "
        f"{b[part]['web_cpu_per_wall']} s a second",
        healthz["p99_ms"] <= b["target_ms"],
        BODIES_ISSUE,
    )


def _detail(figures: JSON) -> str:
    if "bodies" in figures:
        answers = ", ".join(f"{n} answered {c}" for c, n in sorted(figures["answers"].items()))
        sent_mb = figures["bytes_sent"] / 1e6
        bodies = f"{figures['bodies']} bodies begun within {figures['window_s']} s"
        taken = f"ended after {figures['seconds']} s"
        return f"{bodies}, {taken} ({answers}), {sent_mb:,.0f} MB taken by the sockets"
    return f"status {figures['status']} in {figures['seconds']} s"
