"""The upstream's side: connections the worker opens over its calls, and pacing to the
upstream's request and token limits (fakellm at 600 RPM / 20,000 TPM)."""

from __future__ import annotations

from bench.rows import JSON, Row, dig, missing

PACING_ISSUE = 14


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


def pacing(s: JSON) -> list[Row]:
    """fakellm at 600 RPM / 20,000 TPM, jobs offered at twice the request limit."""
    p = dig(s, "pacing")
    if not p:
        return [missing("pacing: 429s, completions, throughput, p99", "see issue 14", PACING_ISSUE)]
    paced, unpaced, again = p["paced"], p["unpaced"], p.get("unpaced_resubmitted")
    rate, off_by = paced["completed_per_s_after_burst"], p["paced_rate_vs_limit_pct"]
    p99_on, p99_off = paced["latency"]["p99_ms"], unpaced["latency"]["p99_ms"]
    completed_only = Row(
        "p99 latency of the jobs completed, paced vs unpaced (which fails the jobs that "
        "would wait longest)",
        "— (not comparable)",
        f"{p99_on / 1000:.1f} s vs {p99_off / 1000:.1f} s",
        None,
        PACING_ISSUE,
    )
    return [*_counts(paced, unpaced, rate, off_by), _p99_every_job(paced, again), completed_only]


def _p99_every_job(paced: JSON, again: JSON | None) -> Row:
    """Paced against unpaced stacks whose clients submit a failed job again: every job ends
    completed both ways, so the latencies compare over the same jobs."""
    measure = "p99 latency, every job completed, paced vs unpaced with failed jobs resubmitted"
    if not again:
        return missing(measure, "lower paced", PACING_ISSUE)
    p99_on, p99_off = paced["latency"]["p99_ms"], again["latency"]["p99_ms"]
    reached = (
        f"{p99_on / 1000:.1f} s vs {p99_off / 1000:.1f} s "
        f"({again['completed']} of {again['jobs']} completed, "
        f"{again['client_requests'] / again['jobs']:.1f} requests a job)"
    )
    every = paced["completed"] == paced["jobs"] and again["completed"] == again["jobs"]
    return Row(measure, "lower paced", reached, every and p99_on < p99_off, PACING_ISSUE)


def _counts(paced: JSON, unpaced: JSON, rate: float | None, off_by: float | None) -> list[Row]:
    return [
        Row(
            "upstream 429s, paced (unpaced)",
            "(almost) none",
            f"{paced['upstream_429']} of {paced['upstream_requests']} calls "
            f"({unpaced['upstream_429']} of {unpaced['upstream_requests']})",
            paced["upstream_429"] <= 0.01 * paced["upstream_requests"],
            PACING_ISSUE,
        ),
        Row(
            "jobs completed, paced (unpaced)",
            "every job",
            f"{paced['completed']} of {paced['jobs']} "
            f"({unpaced['completed']} of {unpaced['jobs']})",
            paced["completed"] == paced["jobs"],
            PACING_ISSUE,
        ),
        Row(
            "paced throughput once the bucket is spent",
            "the limit, within 5 %",
            f"{rate} jobs/s for {paced['limit_per_s']:g}/s ({off_by:+.1f} %)",
            off_by is not None and abs(off_by) <= 5,
            PACING_ISSUE,
        ),
    ]
