"""The results as Markdown: the targets table, then the figures behind it."""

from __future__ import annotations

from typing import Any

from bench import report12
from bench.rows import Row, dig, table

JSON = dict[str, Any]


def targets_table(rows: list[Row]) -> str:
    """The targets with the figure reached and whether it is met."""
    mark = {True: "**met**", False: "**not met**", None: "—"}
    return table(
        ["measure", "target", "reached", "met"],
        [[r.measure, r.target, r.reached, mark[r.met]] for r in rows],
    )


def targets_tables(rows: list[Row]) -> list[str]:
    """Issue 12's table, then the earlier issues' targets (issue in the first column)."""
    mine = [r for r in rows if r.issue == 12]
    earlier = [r for r in rows if r.issue != 12]
    mark = {True: "**met**", False: "**not met**", None: "—"}
    return [
        "### Targets (issue 12)",
        targets_table(mine),
        "### Earlier targets (issues 4, 6, 15, 16)",
        table(
            ["issue", "measure", "target", "reached", "met"],
            [[r.issue, r.measure, r.target, r.reached, mark[r.met]] for r in earlier],
        ),
    ]


def compare_table(s: JSON) -> str:
    """Measure 1: each alternative at its lowest and highest concurrency held."""
    rows = []
    for name, sys_ in (dig(s, "compare", "systems") or {}).items():
        first = sys_["levels"][0]
        rows.append(
            [
                name,
                first["clients"],
                first["latency"]["p50_ms"],
                first["latency"]["p99_ms"],
                first["requests_per_job"],
                sys_["max_held"],
                sys_["breaks_at"] or "not within the levels run",
            ]
        )
    return table(
        [
            "client",
            "clients",
            "added p50 ms",
            "added p99 ms",
            "requests/job",
            "held up to",
            "breaks at",
        ],
        rows,
    )


def waiters_table(s: JSON) -> str:
    """Measures 2-3: each parked level, chatq then gthread."""
    rows = []
    for name in ("waiters", "gthread"):
        for lv in dig(s, name, "levels") or []:
            rows.append(
                [
                    name if name == "gthread" else "chatq",
                    lv["waiters"],
                    lv["probes"],
                    f"{lv['probe']['answered_in_grace']}/{lv['probes']}",
                    lv["wake"]["p50_ms"],
                    lv["wake"]["p99_ms"],
                    lv["errors"],
                    lv["rss_parked_mib"],
                    lv["kib_per_waiter"],
                    lv["park_s"],
                ]
            )
    return table(
        [
            "server",
            "waiters",
            "probes",
            "probes answered < 1 s",
            "wake p50 ms",
            "wake p99 ms",
            "errors",
            "RSS MiB",
            "KiB/waiter",
            "park s",
        ],
        rows,
    )


def cpu_line(cpu: JSON | None) -> str:
    """`name n % (s)` for each process."""
    return ", ".join(f"{k} {v['cpu_pct']} %" for k, v in (cpu or {}).items())


def _where(b: JSON | None) -> str:
    """A job's added time by stage (p50, ms)."""
    if not b:
        return ""
    return (
        f"submit {b['submit_to_created_ms']}, queued {b['queued_ms']}, run +"
        f"{b['run_beyond_upstream_ms']}, to client {b['completed_to_client_ms']}"
    )


def throughput_table(s: JSON) -> str:
    """Measure 4 with CPU per process, and the bare Celery baselines."""
    t = dig(s, "throughput") or {}
    rows = []
    for name in ("instant", "streaming_1s", "instant_threads_pool"):
        r = t.get(name)
        if r:
            rows.append(
                [
                    f"chatq {name}",
                    r["clients"],
                    r["jobs_per_s"],
                    r["latency"]["p50_ms"],
                    r["in_flight"]["mean"],
                    cpu_line(r["cpu"]),
                    _where(r.get("breakdown")),
                ]
            )
    for b in t.get("bare_celery", []):
        rows.append(
            [
                f"bare Celery ({b['settings']} settings, {b['pool']} x{b['slots']})",
                "—",
                b["jobs_per_s"],
                None,
                None,
                cpu_line(b["cpu"]),
                "",
            ]
        )
    return table(
        [
            "run",
            "clients",
            "jobs/s",
            "added p50 ms",
            "in flight",
            "CPU (% of a core)",
            "where a job's time goes (p50 ms)",
        ],
        rows,
    )


def pooling_table(s: JSON) -> str:
    """Issue 4: pooled against fresh connections."""
    rows = [
        [
            v["kind"],
            "https" if v["tls"] else "http",
            v["threads"],
            v["calls"],
            v["latency"]["p50_ms"],
            v["latency"]["p99_ms"],
            v["cpu_ms_per_call"],
            v["connections_opened"],
        ]
        for v in dig(s, "pooling", "variants") or []
    ]
    return table(
        [
            "session",
            "scheme",
            "threads",
            "calls",
            "p50 ms",
            "p99 ms",
            "CPU ms/call",
            "connections opened",
        ],
        rows,
    )


def http_metrics_table(s: JSON) -> str:
    """Issue 35: CPU per request of the HTTP metrics, the exporter against hand-written hooks."""
    h = dig(s, "httpmetrics") or {}
    us, added = h.get("cpu_us_per_request", {}), h.get("metrics_cpu_us_per_request", {})
    rows = [["WSGI", name, value, added.get(name, "—")] for name, value in us.items()]
    real = h.get("gunicorn", {})
    for name, value in real.get("cpu_us_per_request", {}).items():
        rows.append(["gunicorn, GET /healthz", name, value, "—"])
    if real:
        paired = real["exporter_minus_hand_written_us"]
        rows.append(
            ["gunicorn, GET /healthz", "exporter minus hand_written, per round", paired, "—"]
        )
    return table(["through", "app", "CPU µs/request", "metrics' µs/request"], rows)


def background_table(s: JSON) -> str:
    """Issue 15: a background response against a plain job, one client, instant upstream."""
    flows = dig(s, "background", "flows") or {}
    rows = [
        [
            name,
            f["requests_per_job"],
            f["latency"]["p50_ms"],
            f["latency"]["p99_ms"],
            f.get("submit_server_ms"),
            f["web_cpu_ms_per_job"],
            f["worker_cpu_ms_per_job"],
        ]
        for name, f in flows.items()
    ]
    return table(
        [
            "flow",
            "requests/job",
            "p50 ms",
            "p99 ms",
            "submit server ms",
            "web CPU ms/job",
            "worker CPU ms/job",
        ],
        rows,
    )


def other_lines(s: JSON) -> str:
    """Token latency, Redis memory and TTL, connections: one line each."""
    lines = []
    mem = dig(s, "memory")
    if mem:
        lines.append(
            f"- Redis memory per finished job: {mem.get('record_bytes_per_job')} bytes "
            f"by MEMORY USAGE (job hash {mem.get('job_hash_bytes')} + events stream "
            f"{mem.get('events_stream_bytes')}, {mem.get('events_in_stream')} events); "
            f"used_memory grew {mem['used_bytes_per_job']:,} bytes per job (dataset "
            f"{mem['dataset_bytes_per_job']:,}) over {mem['jobs']:,} jobs. With "
            f"CHATQ_JOB_TTL={mem['ttl_s']} s, every job key was gone "
            f"{mem['expired_after_s']} s later: {mem['cleaned']} (keys left: "
            f"{mem['keys_left_after_ttl']})."
        )
    con = dig(s, "connections")
    if con:
        lines.append(
            f"- Upstream connections of the chatq worker: {con['connections_opened']:,} "
            f"over {con['calls']:,} calls ({con['connections_per_call']} per call)."
        )
    return "\n".join(lines)


def markdown(rows: list[Row], sections: JSON) -> str:
    """The whole results block."""
    parts = [
        *targets_tables(rows),
        "### Long-poll against the alternatives (1 s upstream)",
        compare_table(sections),
        "### Parked waiters, woken at a set rate",
        waiters_table(sections),
        "### Per-waiter memory by tracemalloc (1 process)",
        report12.waitermem_table(sections),
        "### Throughput",
        throughput_table(sections),
        "### CPU per job by role (ms)",
        report12.cpu_table(sections),
        "### Prefetch ablation (1 s tasks, chatq's Celery settings)",
        report12.prefetch_table(sections),
        "### Gateway overhead: direct, chatq, LiteLLM (instant upstream)",
        report12.gateway_table(sections),
        "### Redis commands and round trips per plain job",
        report12.redis_table(sections),
        "### Token latency (100 streams x 10 tokens/s)",
        report12.tokens_table(sections),
        "### Upstream calls: pooled against fresh",
        pooling_table(sections),
        "### HTTP metrics: prometheus-flask-exporter against hand-written hooks",
        http_metrics_table(sections),
        "### Background responses against plain jobs",
        background_table(sections),
        "### Other figures",
        other_lines(sections),
    ]
    return "\n\n".join(parts) + "\n"
