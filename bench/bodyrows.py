"""Issue 34's H2 target, judged from the `bodies` section: `/healthz` p99 while a web process
receives an accepted 200 MB upload, and while it is sent 100 MB unauthenticated bodies."""

from __future__ import annotations

from bench.rows import JSON, Row, dig, fmt, missing

ISSUE = 34
TARGET = "≤ 50 ms"


def bodies(s: JSON) -> list[Row]:
    """The two rows: the upload, then the refused bodies."""
    b = dig(s, "bodies")
    upload_mb = (dig(b, "upload", "bytes") or 200_000_000) / 1e6
    refused_mb = (dig(b, "refused", "body_bytes") or 100_000_000) / 1e6
    return [
        _row(b, "upload", f"/healthz p99 during a {upload_mb:,.0f} MB upload (accepted)"),
        _row(b, "refused", f"/healthz p99 during {refused_mb:,.0f} MB unauthenticated bodies"),
    ]


def _row(b: JSON | None, part: str, measure: str) -> Row:
    healthz, idle = dig(b, part, "healthz"), dig(b, "idle", "healthz")
    if not healthz or healthz["p99_ms"] is None or not idle:
        return missing(measure, TARGET, ISSUE)
    assert b is not None
    return Row(
        measure,
        TARGET,
        f"{fmt(healthz['p99_ms'], ' ms')} (p50 {fmt(healthz['p50_ms'], ' ms')}, max "
        f"{fmt(healthz['max_ms'], ' ms')}, {healthz['n']} probes; idle p99 "
        f"{fmt(idle['p99_ms'], ' ms')}); {_detail(b[part])}; web CPU "
        f"{b[part]['web_cpu_per_wall']} s a second",
        healthz["p99_ms"] <= b["target_ms"],
        ISSUE,
    )


def _detail(figures: JSON) -> str:
    if "bodies" in figures:
        answers = ", ".join(f"{n} answered {c}" for c, n in sorted(figures["answers"].items()))
        sent_mb = figures["bytes_sent"] / 1e6
        bodies = f"{figures['bodies']} bodies begun within {figures['window_s']} s"
        taken = f"ended after {figures['seconds']} s"
        return f"{bodies}, {taken} ({answers}), {sent_mb:,.0f} MB taken by the sockets"
    return f"status {figures['status']} in {figures['seconds']} s"
