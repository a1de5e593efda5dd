"""The results as Markdown: the targets table, then the figures behind it."""

from __future__ import annotations

from typing import Any

from bench.targets import Row, dig

JSON = dict[str, Any]


def table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("—" if c is None else str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def targets_table(rows: list[Row]) -> str:
    """The targets with the figure reached and whether it is met."""
    mark = {True: "**met**", False: "**not met**", None: "—"}
    return table(["measure", "target", "reached", "met"],
                 [[r.measure, r.target, r.reached, mark[r.met]] for r in rows])


def compare_table(s: JSON) -> str:
    """Measure 1: each alternative at its lowest and highest concurrency held."""
    rows = []
    for name, sys_ in (dig(s, "compare", "systems") or {}).items():
        first = sys_["levels"][0]
        rows.append([name, first["clients"], first["latency"]["p50_ms"],
                     first["latency"]["p99_ms"], first["requests_per_job"],
                     sys_["max_held"], sys_["breaks_at"] or "not within the levels run"])
    return table(["client", "clients", "added p50 ms", "added p99 ms", "requests/job",
                  "held up to", "breaks at"], rows)


def waiters_table(s: JSON) -> str:
    """Measures 2-3: each parked level, chatq then gthread."""
    rows = []
    for name in ("waiters", "gthread"):
        for lv in dig(s, name, "levels") or []:
            rows.append([name if name == "gthread" else "chatq", lv["waiters"], lv["probes"],
                         f"{lv['probe']['answered_in_grace']}/{lv['probes']}",
                         lv["wake"]["p50_ms"], lv["wake"]["p99_ms"], lv["errors"],
                         lv["rss_parked_mib"], lv["kib_per_waiter"], lv["park_s"]])
    return table(["server", "waiters", "probes", "probes answered < 1 s", "wake p50 ms",
                  "wake p99 ms", "errors", "RSS MiB", "KiB/waiter", "park s"], rows)


def cpu_line(cpu: JSON | None) -> str:
    """`name n % (s)` for each process."""
    return ", ".join(f"{k} {v['cpu_pct']} %" for k, v in (cpu or {}).items())


def _where(b: JSON | None) -> str:
    """A job's added time by stage (p50, ms)."""
    if not b:
        return ""
    return (f"submit {b['submit_to_created_ms']}, queued {b['queued_ms']}, run +"
            f"{b['run_beyond_upstream_ms']}, to client {b['completed_to_client_ms']}")


def throughput_table(s: JSON) -> str:
    """Measure 4 with CPU per process, and the bare Celery baselines."""
    t = dig(s, "throughput") or {}
    rows = []
    for name in ("instant", "streaming_1s", "instant_threads_pool"):
        r = t.get(name)
        if r:
            rows.append([f"chatq {name}", r["clients"], r["jobs_per_s"], r["latency"]["p50_ms"],
                         r["in_flight"]["mean"], cpu_line(r["cpu"]), _where(r.get("breakdown"))])
    for b in t.get("bare_celery", []):
        rows.append([f"bare Celery ({b['settings']} settings, {b['pool']} x{b['slots']})", "—",
                     b["jobs_per_s"], None, None, cpu_line(b["cpu"]), ""])
    for b in t.get("bare_celery_1s_tasks", []):
        rows.append([f"bare Celery (chatq settings but prefetch x{b['prefetch_multiplier']}, "
                     f"gevent x{b['slots']}), 1 s tasks", "—", b["jobs_per_s"], None,
                     b["in_flight"], cpu_line(b["cpu"]), ""])
    return table(["run", "clients", "jobs/s", "added p50 ms", "in flight", "CPU (% of a core)",
                  "where a job's time goes (p50 ms)"], rows)


def gateway_table(s: JSON) -> str:
    """Measures 5-6: latency through chatq and direct, by arrival rate."""
    rows = [[p["rate_per_s"], p["direct"]["latency"]["p50_ms"], p["direct"]["latency"]["p99_ms"],
             p["chatq"]["latency"]["p50_ms"], p["chatq"]["latency"]["p99_ms"],
             p["overhead"]["p50_ms"], p["overhead"]["p99_ms"], p["chatq"]["jobs_per_s"],
             p["chatq"]["errors"]] for p in dig(s, "gateway", "points") or []]
    return table(["arrivals/s", "direct p50", "direct p99", "chatq p50", "chatq p99",
                  "overhead p50", "overhead p99", "chatq done/s", "errors"], rows)


def pooling_table(s: JSON) -> str:
    """Issue 4: pooled against fresh connections."""
    rows = [[v["kind"], "https" if v["tls"] else "http", v["threads"], v["calls"],
             v["latency"]["p50_ms"], v["latency"]["p99_ms"], v["cpu_ms_per_call"],
             v["connections_opened"]] for v in dig(s, "pooling", "variants") or []]
    return table(["session", "scheme", "threads", "calls", "p50 ms", "p99 ms", "CPU ms/call",
                  "connections opened"], rows)


def background_table(s: JSON) -> str:
    """Issue 15: a background response against a plain job, one client, instant upstream."""
    flows = dig(s, "background", "flows") or {}
    rows = [[name, f["requests_per_job"], f["latency"]["p50_ms"], f["latency"]["p99_ms"],
             f.get("submit_server_ms"), f["web_cpu_ms_per_job"], f["worker_cpu_ms_per_job"]]
            for name, f in flows.items()]
    return table(["flow", "requests/job", "p50 ms", "p99 ms", "submit server ms",
                  "web CPU ms/job", "worker CPU ms/job"], rows)


def other_lines(s: JSON) -> str:
    """Token latency, Redis memory and TTL, connections: one line each."""
    lines = []
    tok = dig(s, "tokens")
    if tok:
        lines.append(f"- Token latency (issue 3), {tok['streams']} streams at {tok['tps']} tokens/s"
                     f": p50 {tok['latency']['p50_ms']} ms, p99 {tok['latency']['p99_ms']} ms "
                     f"({tok['tokens_seen']}/{tok['tokens_expected']} tokens seen).")
    mem = dig(s, "memory")
    if mem:
        lines.append(f"- Redis memory per finished job: {mem.get('record_bytes_per_job')} bytes "
                     f"by MEMORY USAGE (job hash {mem.get('job_hash_bytes')} + events stream "
                     f"{mem.get('events_stream_bytes')}, {mem.get('events_in_stream')} events); "
                     f"used_memory grew {mem['used_bytes_per_job']:,} bytes per job (dataset "
                     f"{mem['dataset_bytes_per_job']:,}) over {mem['jobs']:,} jobs. With "
                     f"CHATQ_JOB_TTL={mem['ttl_s']} s, every job key was gone "
                     f"{mem['expired_after_s']} s later: {mem['cleaned']} (keys left: "
                     f"{mem['keys_left_after_ttl']}).")
    con = dig(s, "connections")
    if con:
        lines.append(f"- Upstream connections of the chatq worker: {con['connections_opened']:,} "
                     f"over {con['calls']:,} calls ({con['connections_per_call']} per call).")
    gw = dig(s, "gateway")
    if gw:
        lines.append(f"- Scaling: held up to {gw['max_rate_held_per_s']} arrivals/s; saturated at "
                     f"{gw['saturated_at_per_s']}/s.")
    return "\n".join(lines)


def markdown(rows: list[Row], sections: JSON) -> str:
    """The whole results block."""
    parts = [
        "### Targets", targets_table(rows),
        "### Long-poll against the alternatives (1 s upstream)", compare_table(sections),
        "### Parked waiters, woken at a set rate", waiters_table(sections),
        "### Throughput", throughput_table(sections),
        "### Gateway overhead and scaling (instant upstream)", gateway_table(sections),
        "### Upstream calls: pooled against fresh", pooling_table(sections),
        "### Background responses against plain jobs", background_table(sections),
        "### Other figures", other_lines(sections),
    ]
    return "\n\n".join(parts) + "\n"
