"""Issue 14's pacing targets, judged from the `pacing` section."""

from __future__ import annotations

from bench.rows import JSON, Row, dig, missing

ISSUE = 14


def pacing(s: JSON) -> list[Row]:
    """fakellm at 600 RPM / 20,000 TPM, jobs offered at twice the request limit."""
    p = dig(s, "pacing")
    if not p:
        return [missing("pacing: 429s, completions, throughput, p99", "see issue 14", ISSUE)]
    paced, unpaced = p["paced"], p["unpaced"]
    rate, off_by = paced["completed_per_s_after_burst"], p["paced_rate_vs_limit_pct"]
    p99_on, p99_off = paced["latency"]["p99_ms"], unpaced["latency"]["p99_ms"]
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
        Row(
            "p99 latency of completed jobs, paced vs unpaced",
            "lower paced",
            f"{p99_on / 1000:.1f} s vs {p99_off / 1000:.1f} s",
            p99_on < p99_off,
            ISSUE,
        ),
    ]
