"""`python -m bench.added [--base DIR] [--rounds N]`: the compare section's first level alone
(4 clients, a 1 s upstream, `POST /v1/jobs?wait=30`; the naive app as the section starts it),
chatq against the naive Flask + Celery app in interleaved rounds, and with `--base` the chatq of
another checkout too (its web and worker run from DIR), so that a change is set against what
it changes in one session on a shared machine. Each round runs every system once, in a
rotated order, and so do the same clients calling the upstream directly, and the floor: the
naive app's view and task on chatq's parts as chatq runs them (`tuned`: bench/alt/tuned_tasks.py)
and a Flask view that only waits 1 s (bench/alt/web.py `/hold`, on gunicorn's gevent worker as
chatq's web runs). Per system: each round's p50 past 1 s and their median, the p50 over all its
jobs, and where a chatq job's time goes (bench/sections/common.py breakdown); per round, what
each system adds beyond the direct call's p50 of that round, its ratio to the naive app's, and
their median. Then each system alone, one client on an instant upstream (`--instant-s`): its
p50 and its processes' CPU ms per job by role."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import NamedTuple

from bench.alt import tuned_tasks
from bench.alt.stack import alt_env, start_celery, start_gunicorn
from bench.lab import MAIN_ENV, Lab
from bench.loadrun import run_load
from bench.procstat import CpuMeter
from bench.sections.common import JSON, body, breakdown, closed_spec, target
from bench.sections.compare import ALT_CELERY_SLOTS, GTHREAD_THREADS, MODEL, UPSTREAM_S
from bench.sizes import FULL
from bench.stack import ChatqStack
from bench.stats import summary_ms
from scripts.localredis import LocalRedis
from tests.procs import ALICE_KEY, UPSTREAM_KEY, base_env, start_web, start_worker

CLIENTS = FULL.compare_levels[0]
NAIVE = "naive"
DIRECT = "direct"
VIEW = "flask_view"
TUNED = "tuned"
NO_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there: a server that must not use one
INSTANT_MODEL = "fake"
UPSTREAM = "upstream"


class System(NamedTuple):
    """One system as the rounds call it: its load generator flow, where, with which key, and
    the processes whose CPU a job of it takes (by role)."""

    flow: str
    url: str
    key: str
    pids: dict[str, int]


def start_chatq_in(checkout: Path, upstream: str, server: LocalRedis) -> ChatqStack:
    """One worker and one web run from `checkout` (`python -m` imports the code of the folder
    it starts in) on `server`, with the main stack's settings (bench/lab.py MAIN_ENV)."""
    env = base_env(server.url, upstream, **MAIN_ENV)
    chdir = ("env", "-C", str(checkout))
    worker = start_worker(env, server.url, chdir)
    web, url = start_web(env, prefix=chdir)
    return ChatqStack(redis=server, url=url, web=web, env=env, workers=[worker])


def _chatq(stack: ChatqStack, upstream_pid: int) -> System:
    return System("chatq", stack.url, ALICE_KEY, {**stack.pids(), UPSTREAM: upstream_pid})


def _flask_celery(lab: Lab, tuned: bool) -> System:
    """The naive app on a Redis of its own: as the compare section starts it or, `tuned`, its
    view and task on chatq's parts as chatq runs them (gunicorn's gevent worker, a gevent Celery
    worker on chatq's Celery settings: bench/alt/tuned_tasks.py)."""
    server = lab.redis()
    env = alt_env(server.url, lab.fakellm(), UPSTREAM_KEY, ALT_CELERY_SLOTS)
    if tuned:
        env["ALT_TASKS"] = "tuned"
        celery = lab.track(
            start_celery(env, "gevent", ALT_CELERY_SLOTS, tuned_tasks.__name__, tuned_tasks.QUEUE)
        )
        web, url = start_gunicorn(env, "gevent", 1)
    else:
        celery = lab.track(start_celery(env, "threads", ALT_CELERY_SLOTS))
        web, url = start_gunicorn(env, "gthread", 1, GTHREAD_THREADS)
    lab.track(web)
    assert server.process is not None
    pids = {"web": web.pid, "worker": celery.pid, "redis": server.process.pid}
    return System("flask", url, ALICE_KEY, {**pids, UPSTREAM: lab.fakellm_pid()})


def _view(lab: Lab) -> System:
    """A Flask view that only waits as long as the upstream would, on gunicorn's gevent worker
    as chatq's web runs: what a request costs on these parts before any queue. It touches no
    Redis, so none is started for it (NO_REDIS_URL)."""
    env = alt_env(NO_REDIS_URL, lab.fakellm(), UPSTREAM_KEY, ALT_CELERY_SLOTS)
    proc, url = start_gunicorn(env, "gevent", 1)
    lab.track(proc)
    return System("flask_view", url, "", {"web": proc.pid})


def _systems(lab: Lab, base: Path | None) -> dict[str, System]:
    """Every system of the rounds, started."""
    systems = {"chatq": _chatq(lab.chatq(), lab.fakellm_pid("main"))}
    if base is not None:
        stack = start_chatq_in(base, lab.fakellm("main"), lab.redis())
        lab.track(stack.web)
        lab.track(stack.workers[0])
        systems["base"] = _chatq(stack, lab.fakellm_pid("main"))
    systems[NAIVE] = _flask_celery(lab, tuned=False)
    systems[TUNED] = _flask_celery(lab, tuned=True)
    systems[VIEW] = _view(lab)
    direct = lab.fakellm().removesuffix("/v1")
    systems[DIRECT] = System("front_door", direct, UPSTREAM_KEY, {UPSTREAM: lab.fakellm_pid()})
    return systems


def _added_s(outcomes: list[JSON]) -> list[float]:
    return [o["t1"] - o["t0"] - UPSTREAM_S for o in outcomes if o["ok"]]


def _load(system: System, model: str, hold_s: float, clients: int, duration_s: float) -> JSON:
    """One system's closed loop on `model` (the Flask view waits `hold_s` instead)."""
    tgt = {**target(system.url, body(model), system.key), "hold_s": hold_s}
    return run_load(closed_spec(system.flow, tgt, clients, duration_s))


def run(
    systems: dict[str, System], rounds: int, duration_s: float, clients: int
) -> dict[str, list[list[JSON]]]:
    """Every system once a round, the order rotated; each system's outcomes, by round."""
    names = list(systems)
    seen: dict[str, list[list[JSON]]] = {name: [] for name in names}
    for n in range(rounds):
        for name in names[n % len(names) :] + names[: n % len(names)]:
            load = _load(systems[name], MODEL, UPSTREAM_S, clients, duration_s)
            seen[name].append(list(load["outcomes"]))
    return seen


def instant(systems: dict[str, System], duration_s: float) -> JSON:
    """Each system alone with one client on an instant upstream (the view waits 0 s): its
    p50 and its processes' CPU ms per job by role. One client and no upstream time leave a
    job's latency its path's own: the CPU of each process on it, and the hops between them."""
    out: JSON = {}
    for name, system in systems.items():
        meter = CpuMeter(system.pids).start()
        outcomes = list(_load(system, INSTANT_MODEL, 0.0, 1, duration_s)["outcomes"])
        used = meter.stop()
        done = [o["t1"] - o["t0"] for o in outcomes if o["ok"]]
        cpu = {role: round(1000 * used[role]["cpu_s"] / max(1, len(done)), 2) for role in used}
        out[name] = {
            "jobs": len(done),
            "p50_ms": summary_ms(done)["p50_ms"],
            "cpu_ms_per_job": {**cpu, "total": round(sum(cpu.values()), 2)},
        }
    return out


def summary(seen: dict[str, list[list[JSON]]]) -> JSON:
    """Each system's rounds, and what each chatq adds beyond the direct call against what the
    naive app adds, round by round."""
    p50s = {
        name: [summary_ms(_added_s(outcomes))["p50_ms"] or 0.0 for outcomes in runs]
        for name, runs in seen.items()
    }
    beyond = {
        name: [p - d for p, d in zip(rounds, p50s[DIRECT], strict=True)]
        for name, rounds in p50s.items()
        if name not in (DIRECT, VIEW)  # the view calls no upstream: its p50 past 1 s is its own
    }
    out: JSON = {}
    for name, runs in seen.items():
        every = [o for outcomes in runs for o in outcomes]
        out[name] = {
            "rounds_p50_ms": p50s[name],
            "median_of_rounds_ms": round(statistics.median(p50s[name]), 2),
            "all": summary_ms(_added_s(every)),
            "errors": sum(1 for o in every if not o["ok"]),
        }
        if name in beyond:
            out[name]["beyond_direct_median_ms"] = round(statistics.median(beyond[name]), 2)
        if name not in (NAIVE, DIRECT, VIEW, TUNED):
            out[name]["breakdown"] = breakdown(every, UPSTREAM_S)
        if name not in (NAIVE, DIRECT, VIEW):
            out[name].update(_ratios(p50s[name], p50s[NAIVE], "to_naive"))
            out[name].update(_ratios(beyond[name], beyond[NAIVE], "beyond_direct_to_naive"))
    return out


def _ratios(mine: list[float], naive: list[float], name: str) -> JSON:
    ratios = [a / b for a, b in zip(mine, naive, strict=True) if b > 0]
    return {
        f"{name}_by_round": [round(r, 2) for r in ratios],
        f"{name}_median": round(statistics.median(ratios), 2) if ratios else None,
    }


def main(argv: list[str] | None = None) -> None:
    """Run the rounds and the instant loops, print the summary as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.added", description=__doc__)
    parser.add_argument("--base", type=Path, help="another checkout whose chatq runs beside")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--duration", type=float, default=FULL.compare_duration_s)
    parser.add_argument("--clients", type=int, default=CLIENTS, help="another of the levels")
    parser.add_argument(
        "--instant-s", type=float, default=10.0, help="each system's one-client instant loop"
    )
    args = parser.parse_args(argv)
    lab = Lab(FULL)
    try:
        systems = _systems(lab, args.base)
        out = summary(run(systems, args.rounds, args.duration, args.clients))
        out["instant_one_client"] = instant(systems, args.instant_s)
    finally:
        lab.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
