"""Issue 4 / 6: upstream connections the chatq worker opened over all of its calls in the run.

The main stack has a fakellm of its own, never reset: its /stats counts every call and
every TCP connection of the main worker over the whole run; jobs are added until the count
of calls reaches the target (or the time cap).
"""

from __future__ import annotations

import time

from bench.lab import Lab
from bench.loadrun import run_load
from bench.sections.common import JSON, body, closed_spec, target

TOP_UP_CLIENTS = 64
TOP_UP_STEP_S = 5.0

STACKS = [("main", {})]


def run(lab: Lab) -> JSON:
    """Top up the main worker's calls to the target, then read fakellm's counters."""
    stack = lab.chatq()
    wanted, cap_s = lab.sizes.conn_calls, lab.sizes.conn_top_up_cap_s
    start = time.monotonic()
    reads = 1
    while (left := wanted - lab.fakellm_stats("main")["requests"]) > 0:
        reads += 1
        step_s = min(TOP_UP_STEP_S, cap_s - (time.monotonic() - start))
        if step_s <= 0:
            break
        run_load(
            closed_spec("chatq", target(stack.url, body()), TOP_UP_CLIENTS, step_s, max_jobs=left)
        )
    stats = lab.fakellm_stats("main")
    slots = int(stack.env["CHATQ_WORKER_CONCURRENCY"])
    opened = stats["connections_opened"] - reads  # each /stats read opened one itself
    return {
        "calls": stats["requests"],
        "connections_opened": opened,
        "worker_concurrency": slots,
        "limit": int(slots * 1.05),
        "connections_per_call": round(opened / max(stats["requests"], 1), 3),
        "top_up_s": round(time.monotonic() - start, 1),
    }
