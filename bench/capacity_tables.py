"""The Markdown tables of what chatq holds and what a job costs: parked waiters and their
memory, throughput and CPU per role against bare Celery, the prefetch ablation, Redis
commands per job."""

from __future__ import annotations

from bench.rows import JSON, cpu_line, dig, table

CHATQ_ROLES = ("web", "worker", "redis", "fakellm", "loadgen")


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


def waitermem_table(s: JSON) -> str:
    """KiB per parked waiter by tracemalloc, by RSS, and where the Python memory is held."""
    w = dig(s, "waitermem")
    if not w:
        return ""
    sites = "; ".join(
        f"`{t['where']}` {t['bytes_per_waiter'] / 1024:.2f}" for t in w["top_sites"][:8]
    )
    return table(
        ["waiters", "KiB/waiter (tracemalloc)", "KiB/waiter (RSS)", "errors"],
        [[w["waiters"], w["kib_per_waiter"], w["rss_kib_per_waiter"], w["errors"]]],
    ) + (f"\n\nLargest sites, KiB per waiter: {sites}.")


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


def cpu_table(s: JSON) -> str:
    """CPU ms per job by role for chatq's runs, and per task for bare Celery's."""
    t = dig(s, "throughput") or {}
    rows = []
    for name in ("instant", "streaming_1s", "instant_threads_pool"):
        per = dig(t, name, "cpu_ms_per_job")
        if per:
            rows.append(
                [
                    f"chatq {name}",
                    *(per.get(r) for r in CHATQ_ROLES),
                    per.get("chatq (web + worker + redis)"),
                ]
            )
    for b in t.get("bare_celery", []):
        roles = b.get("cpu_ms_per_task_by_role") or {}
        rows.append(
            [
                f"bare Celery ({b['settings']} settings, {b['pool']} x{b['slots']}), per task",
                roles.get("producer (harness)"),
                b["cpu_ms_per_task"],
                roles.get("redis"),
                None,
                None,
                b["cpu_ms_per_task"],
            ]
        )
    ratio = t.get("cpu_per_job_vs_bare_task")
    return table(
        [
            "run",
            "web (bare: producer)",
            "worker",
            "Redis",
            "fakellm",
            "load generator",
            "judged (chatq: web + worker + Redis; bare: worker)",
        ],
        rows,
    ) + (f"\n\nchatq instant / bare Celery on the same pool: {ratio}x." if ratio else "")


def prefetch_table(s: JSON) -> str:
    """The ablation's variants and the multiplier it recommends."""
    p = dig(s, "prefetch") or {}
    rows = [
        [
            v["prefetch_multiplier"],
            "0.1 s" if v["poll_cap"] else "none (Celery's 2 s)",
            v["slots"],
            v["tasks"],
            v["jobs_per_s"],
            v["running_with_backlog"],
            v["reserved_beyond_slots_max"],
            v["hidden_reserved_max"],
            cpu_line(v["cpu"]),
        ]
        for v in p.get("variants", [])
    ]
    rec = p.get("recommendation")
    text = (
        f"\n\nRecommended: prefetch x{rec['prefetch_multiplier']} "
        f"({rec['running_with_backlog']} of the best {rec['best']} slots busy while work "
        f"waited); queue depth: {rec['queue_depth']}."
        if rec
        else ""
    )
    return (
        table(
            [
                "prefetch",
                "poll cap",
                "slots",
                "tasks",
                "tasks/s",
                "slots busy while work waited",
                "reserved beyond slots (max)",
                "unacked - running (max)",
                "CPU (% of a core)",
            ],
            rows,
        )
        + text
    )


def redis_table(s: JSON) -> str:
    """Commands per job by name, script calls, commands sent, round trips."""
    r = dig(s, "rediscalls")
    per = dig(r, "per_job")
    if not per:
        return ""
    names = ", ".join(f"{k} {v:g}" for k, v in per["commands_by_name"].items() if v >= 0.5)
    return table(
        [
            "jobs",
            "commands (INFO commandstats)",
            "sent by clients",
            "script calls",
            "round trips",
            "round trips (gross)",
            "idle per s (commands / round trips)",
        ],
        [
            [
                r["jobs"],
                per["commands"],
                per["commands_sent"],
                per["script_calls"],
                per["round_trips"],
                per["round_trips_gross"],
                f"{r['idle_per_s']['commands']} / {r['idle_per_s']['round_trips']}",
            ]
        ],
    ) + (f"\n\nBy command, per job: {names}.")
