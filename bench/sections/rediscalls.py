"""Issue 12: Redis commands and round trips per plain job (submit with wait, no streaming).

A chatq of its own whose web and worker reach Redis only through the harness's counting
proxy (bench/roundtrips.py); the harness reads Redis directly. One client runs one job at a
time (`POST /v1/jobs?wait=30`, then `GET ?wait=30` while 202; fakellm answers at once, not
streamed). What the processes do while idle (the broker poll, heartbeats, sweeps) is
measured over a quiet window first and taken off at the same rate.
"""

from __future__ import annotations

import time
from typing import Any

import redis

from bench.lab import Lab
from bench.loadrun import run_load
from bench.roundtrips import Counts, RoundTripProxy
from bench.sections.common import JSON, body, closed_spec, outcome_summary, target
from bench.stack import start_chatq_on

WARMUP_JOBS = 20
# The harness's own readings, not the processes under test.
OWN_COMMANDS = frozenset({"info"})


def commandstats(client: redis.Redis) -> dict[str, int]:
    """Calls so far by command name (scripts' own commands included), as Redis counts them."""
    raw: dict[str, Any] = client.info("commandstats")
    calls = {}
    for key, value in raw.items():
        name = key.removeprefix("cmdstat_").lower()
        if name not in OWN_COMMANDS:
            calls[name] = int(value["calls"])
    return calls


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


class Reading:
    """Commands by name and the proxy's counts, between `start` and `stop`."""

    def __init__(self, client: redis.Redis, proxy: RoundTripProxy) -> None:
        self.client, self.proxy = client, proxy

    def start(self) -> Reading:
        """The first reading."""
        self._cmds, self._counts, self._t0 = (
            commandstats(self.client),
            self.proxy.counts(),
            time.monotonic(),
        )
        return self

    def stop(self) -> tuple[dict[str, int], Counts, float]:
        """Commands by name, proxy counts and seconds since `start`."""
        cmds, counts = commandstats(self.client), self.proxy.counts()
        return (_delta(cmds, self._cmds), counts.minus(self._counts), time.monotonic() - self._t0)


def _net_per_job(run: float, idle_per_s: float, run_s: float, jobs: int) -> float:
    """Per job, less what the idle processes did in as long."""
    return round((run - idle_per_s * run_s) / max(jobs, 1), 2)


def _per_job(
    busy: tuple[dict[str, int], Counts, float],
    idle: tuple[dict[str, int], Counts, float],
    jobs: int,
) -> JSON:
    """Commands (all, by name, script calls), commands sent and round trips, per job."""
    cmds, counts, run_s = busy
    idle_cmds, idle_counts, idle_s = idle
    net = {
        name: _net_per_job(n, idle_cmds.get(name, 0) / idle_s, run_s, jobs)
        for name, n in cmds.items()
    }
    scripts = sum(v for k, v in net.items() if k in ("eval", "evalsha", "fcall"))
    return {
        "commands": round(sum(net.values()), 1),
        "commands_by_name": dict(sorted(net.items(), key=lambda kv: -kv[1])),
        "script_calls": round(scripts, 2),
        "commands_sent": _net_per_job(
            counts.commands_sent, idle_counts.commands_sent / idle_s, run_s, jobs
        ),
        "round_trips": _net_per_job(
            counts.round_trips, idle_counts.round_trips / idle_s, run_s, jobs
        ),
        "round_trips_gross": round(counts.round_trips / max(jobs, 1), 2),
        "commands_gross": round(sum(cmds.values()) / max(jobs, 1), 1),
        "connections_opened": counts.connections,
    }


def run(lab: Lab) -> JSON:
    """Warm up, a quiet window, then one job at a time through the counting proxy."""
    server = lab.redis()
    proxy = RoundTripProxy(server.port).start()
    stack = start_chatq_on(server, proxy.url, lab.fakellm(), 1, {"CHATQ_WORKER_CONCURRENCY": "300"})
    try:
        tgt = target(stack.url, body())
        run_load(closed_spec("chatq", tgt, 1, 60, 0.0, WARMUP_JOBS))
        client = stack.client()
        reading = Reading(client, proxy).start()
        time.sleep(lab.sizes.redis_idle_s)
        idle = reading.stop()
        reading.start()
        jobs = lab.sizes.redis_jobs
        summary = outcome_summary(run_load(closed_spec("chatq", tgt, 1, 600, 0.0, jobs)))
        busy = reading.stop()
    finally:
        stack.stop()
        proxy.stop()
    return {
        "jobs": summary["jobs"],
        "errors": summary["errors"],
        "clients": 1,
        "latency": summary["latency"],
        "idle_window_s": round(idle[2], 1),
        "idle_per_s": {
            "commands": round(sum(idle[0].values()) / idle[2], 1),
            "round_trips": round(idle[1].round_trips / idle[2], 1),
            "by_command": {name: round(n / idle[2], 1) for name, n in sorted(idle[0].items()) if n},
        },
        "per_job": _per_job(busy, idle, summary["jobs"] - summary["errors"]),
    }
