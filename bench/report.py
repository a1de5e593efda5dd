"""The results as Markdown: the targets tables, then the figures behind them."""

from __future__ import annotations

from bench import capacity_tables as capacity
from bench import latency_tables as latency
from bench.rows import JSON, Row, dig, table
from bench.sections import transport

HEADLINE_ISSUE = 12  # the issue that set the headline table's targets


def targets_table(rows: list[Row]) -> str:
    """The targets with the figure reached and whether it is met."""
    mark = {True: "**met**", False: "**not met**", None: "—"}
    return table(
        ["measure", "target", "reached", "met"],
        [[r.measure, r.target, r.reached, mark[r.met]] for r in rows],
    )


def targets_tables(rows: list[Row]) -> list[str]:
    """The headline table, then the further targets (the issue that set each first)."""
    headline = [r for r in rows if r.issue == HEADLINE_ISSUE]
    further = [r for r in rows if r.issue != HEADLINE_ISSUE]
    mark = {True: "**met**", False: "**not met**", None: "—"}
    return [
        "### Headline targets",
        targets_table(headline),
        "### Further targets",
        table(
            ["issue", "measure", "target", "reached", "met"],
            [[r.issue, r.measure, r.target, r.reached, mark[r.met]] for r in further],
        ),
    ]


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
        latency.compare_table(sections),
        "### Parked waiters, woken at a set rate",
        capacity.waiters_table(sections),
        "### Per-waiter memory by tracemalloc (1 process)",
        capacity.waitermem_table(sections),
        "### Throughput",
        capacity.throughput_table(sections),
        "### CPU per job by role (ms)",
        capacity.cpu_table(sections),
        "### Prefetch ablation (1 s tasks, chatq's Celery settings)",
        capacity.prefetch_table(sections),
        "### Gateway overhead: direct, chatq, LiteLLM (instant upstream)",
        latency.gateway_table(sections),
        "### Redis commands and round trips per plain job",
        capacity.redis_table(sections),
        "### Token latency (100 streams x 10 tokens/s)",
        latency.tokens_table(sections),
        "### Upstream calls: pooled against fresh",
        latency.pooling_table(sections),
        "### Upstream transport: requests.Session against raw urllib3",
        transport.results_table(sections),
        "### HTTP metrics: prometheus-flask-exporter against hand-written hooks",
        latency.http_metrics_table(sections),
        "### Background responses against plain jobs",
        latency.background_table(sections),
        "### Other figures",
        other_lines(sections),
    ]
    return "\n\n".join(parts) + "\n"
