"""The Markdown tables of issue 12's figures: the peers side by side."""

from __future__ import annotations

from bench.rows import JSON, dig, table

CHATQ_ROLES = ("web", "worker", "redis", "fakellm", "loadgen")


def gateway_table(s: JSON) -> str:
    """Each system at each rate: latency, what it adds over the direct call, CPU."""
    gw = dig(s, "gateway") or {}
    rows = []
    stages = [("sequential", gw.get("sequential"))] + [
        (f"{p['rate_per_s']:g}/s", p) for p in gw.get("points", [])
    ]
    for label, stage in stages:
        for name in gw.get("systems", []):
            run = (stage or {}).get(name)
            if not run:
                continue
            added = dig(stage, "overhead", name) or {}
            rows.append(
                [
                    label,
                    name,
                    run["latency"]["p50_ms"],
                    run["latency"]["p99_ms"],
                    added.get("p50_ms"),
                    added.get("p99_ms"),
                    run.get("jobs_per_s"),
                    run["errors"],
                    "yes" if run.get("saturated") else "",
                    _cpu_pct(run.get("cpu")),
                ]
            )
    note = ""
    if gw and dig(gw, "litellm", "status") != "measured":
        note = f"\n\nLiteLLM {dig(gw, 'litellm', 'status')}: {dig(gw, 'litellm', 'note')}."
    sat = "; ".join(
        f"{n} saturated at {v['saturated_at_per_s'] or '—'}/s (held "
        f"{v['max_rate_held_per_s'] or '—'}/s)"
        for n, v in (gw.get("saturation") or {}).items()
        if n != "direct"
    )
    return (
        table(
            [
                "load",
                "system",
                "p50 ms",
                "p99 ms",
                "added p50",
                "added p99",
                "done/s",
                "errors",
                "saturated",
                "CPU (% of a core)",
            ],
            rows,
        )
        + (f"\n\nSaturation: {sat}." if sat else "")
        + note
    )


def _cpu_pct(cpu: JSON | None) -> str:
    return ", ".join(f"{k} {v['cpu_pct']} %" for k, v in (cpu or {}).items())


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
            _cpu_pct(v["cpu"]),
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


def _steady(via: JSON) -> str:
    steady = via.get("steady_latency")
    return f"{steady['p50_ms']} / {steady['p99_ms']}" if steady else "—"


def tokens_table(s: JSON) -> str:
    """Token latency through the events long-poll and through SSE."""
    tok = dig(s, "tokens") or {}
    rows = [
        [
            via,
            tok["streams"],
            tok["tps"],
            tok[via]["latency"]["p50_ms"],
            tok[via]["latency"]["p99_ms"],
            tok[via]["latency"]["max_ms"],
            _steady(tok[via]),
            f"{tok[via]['tokens_seen']}/{tok[via]['tokens_expected']}",
            tok[via]["requests"],
        ]
        for via in ("events", "sse")
        if via in tok
    ]
    return table(
        [
            "followed by",
            "streams",
            "tokens/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "after 0.5 s: p50 / p99 ms",
            "tokens seen",
            "requests",
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
