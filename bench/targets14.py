"""Issue 14's pacing targets, judged from the `pacing` section."""

from __future__ import annotations

from bench.rows import JSON, Row, dig, fmt, missing

ISSUE = 14


def pacing(s: JSON) -> list[Row]:
    """fakellm at 600 RPM / 20,000 TPM, jobs offered at twice the request limit."""
    p = dig(s, "pacing")
    if not p:
        return [missing("pacing: 429s, completions, throughput, p99", "see issue 14", ISSUE)]
    paced, unpaced, again = p["paced"], p["unpaced"], p.get("unpaced_resubmitted")
    rate, off_by = paced["completed_per_s_after_burst"], p["paced_rate_vs_limit_pct"]
    p99_on, p99_off = paced["latency"]["p99_ms"], unpaced["latency"]["p99_ms"]
    completed_only = Row(
        "p99 latency of the jobs completed, paced vs unpaced (which fails the jobs that "
        "would wait longest)",
        "— (not comparable)",
        f"{p99_on / 1000:.1f} s vs {p99_off / 1000:.1f} s",
        None,
        ISSUE,
    )
    return [*_counts(paced, unpaced, rate, off_by), _p99_every_job(paced, again), completed_only]


def _p99_every_job(paced: JSON, again: JSON | None) -> Row:
    """Paced against unpaced stacks whose clients submit a failed job again: every job ends
    completed both ways, so the latencies compare over the same jobs."""
    measure = "p99 latency, every job completed, paced vs unpaced with failed jobs resubmitted"
    if not again:
        return missing(measure, "lower paced", ISSUE)
    p99_on, p99_off = paced["latency"]["p99_ms"], again["latency"]["p99_ms"]
    reached = (
        f"{p99_on / 1000:.1f} s vs {p99_off / 1000:.1f} s "
        f"({again['completed']} of {again['jobs']} completed, "
        f"{again['client_requests'] / again['jobs']:.1f} requests a job)"
    )
    every = paced["completed"] == paced["jobs"] and again["completed"] == again["jobs"]
    return Row(measure, "lower paced", reached, every and p99_on < p99_off, ISSUE)


def _counts(paced: JSON, unpaced: JSON, rate: float | None, off_by: float | None) -> list[Row]:
    return [
        Row(
            "upstream 429s, paced (unpaced)",
            "(almost) none",
            f"{paced['upstream_429']} of {paced['upstream_requests']} calls "
            f"({unpaced['upstream_429']} of {unpaced['upstream_requests']})",
            paced["upstream_429"] <= 0.01 * paced["upstream_requests"],
            ISSUE,
        ),
        Row(
            "jobs completed, paced (unpaced)",
            "every job",
            f"{paced['completed']} of {paced['jobs']} "
            f"({unpaced['completed']} of {unpaced['jobs']})",
            paced["completed"] == paced["jobs"],
            ISSUE,
        ),
        Row(
            "paced throughput once the bucket is spent",
            "the limit, within 5 %",
            f"{rate} jobs/s for {paced['limit_per_s']:g}/s ({off_by:+.1f} %)",
            off_by is not None and abs(off_by) <= 5,
            ISSUE,
        ),
    ]


def fairness(s: JSON) -> list[Row]:
    """Bob's wait for a slot beside alice's flood of 1 s jobs, against his wait alone."""
    f = dig(s, "fairness")
    if not f:
        return [missing("fairness: bob's wait beside a flood", "within 1.5x of alone", ISSUE)]
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
        return [missing(measure, target, ISSUE)]
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
    return Row(measure, "within 1.5x of alone" if judged else target, reached, met, ISSUE)


def _split_row(v: JSON, stack: str = "capped") -> Row:
    """Where the capped tail is: bob's jobs made while the flood was being submitted, or after."""
    while_, after = v.get("with_flood_while_submitted"), v.get("with_flood_after_submitted")
    measure = f"the same ({stack}), bob's jobs made while the flood was still submitted / after"
    if not while_ or not after:
        return missing(measure, "— (where the tail is)", ISSUE)
    spans = ", ".join(f"{s:g}" for s in v.get("flood_submitted_in_s", []))
    reached = (
        f"{fmt(while_['p50_ms'])} / {fmt(while_['p99_ms'])} ms ({while_['n']} jobs); "
        f"{fmt(after['p50_ms'])} / {fmt(after['p99_ms'])} ms ({after['n']} jobs); "
        f"the flood submitted in {spans} s"
    )
    return Row(measure, "— (where the tail is)", reached, None, ISSUE)
