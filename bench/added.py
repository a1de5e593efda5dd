"""`python -m bench.added [--base DIR] [--rounds N]`: the compare section's first level alone
(4 clients, a 1 s upstream, `POST /v1/jobs?wait=30`; the naive app as the section starts it),
chatq against the naive Flask + Celery app in interleaved rounds, and with `--base` the chatq of
another checkout too (its web and worker run from DIR), so that a change is set against what
it changes in one session on a shared machine. Each round runs every system once, in a
rotated order, and so do the same clients calling the upstream directly. Per system: each
round's p50 past 1 s and their median, the p50 over all its jobs, and where a chatq job's time
goes (bench/sections/common.py breakdown); per round, what each system adds beyond the direct
call's p50 of that round, the ratio of each chatq's to the naive app's, and their median."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.alt.stack import alt_env, start_celery, start_gunicorn
from bench.lab import MAIN_ENV, Lab
from bench.loadrun import run_load
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


def start_chatq_in(checkout: Path, upstream: str, server: LocalRedis) -> ChatqStack:
    """One worker and one web run from `checkout` (`python -m` imports the code of the folder
    it starts in) on `server`, with the main stack's settings (bench/lab.py MAIN_ENV)."""
    env = base_env(server.url, upstream, **MAIN_ENV)
    chdir = ("env", "-C", str(checkout))
    worker = start_worker(env, server.url, chdir)
    web, url = start_web(env, prefix=chdir)
    return ChatqStack(redis=server, url=url, web=web, env=env, workers=[worker])


def _naive(lab: Lab) -> str:
    """The naive app, started as the compare section starts it; its URL."""
    env = alt_env(lab.redis().url, lab.fakellm(), UPSTREAM_KEY, ALT_CELERY_SLOTS)
    lab.track(start_celery(env, "threads", ALT_CELERY_SLOTS))
    gthread, url = start_gunicorn(env, "gthread", 1, GTHREAD_THREADS)
    lab.track(gthread)
    return url


def _systems(lab: Lab, base: Path | None) -> dict[str, tuple[str, str, str]]:
    """Name -> (load generator flow, base URL, key)."""
    systems = {"chatq": ("chatq", lab.chatq().url, ALICE_KEY)}
    if base is not None:
        stack = start_chatq_in(base, lab.fakellm("main"), lab.redis())
        lab.track(stack.web)
        lab.track(stack.workers[0])
        systems["base"] = ("chatq", stack.url, ALICE_KEY)
    systems[NAIVE] = ("flask", _naive(lab), ALICE_KEY)
    systems[DIRECT] = ("front_door", lab.fakellm().removesuffix("/v1"), UPSTREAM_KEY)
    return systems


def _added_s(outcomes: list[JSON]) -> list[float]:
    return [o["t1"] - o["t0"] - UPSTREAM_S for o in outcomes if o["ok"]]


def run(
    lab: Lab, base: Path | None, rounds: int, duration_s: float, clients: int = CLIENTS
) -> dict[str, list[list[JSON]]]:
    """Every system once a round, the order rotated; each system's outcomes, by round."""
    systems = _systems(lab, base)
    names = list(systems)
    seen: dict[str, list[list[JSON]]] = {name: [] for name in names}
    for n in range(rounds):
        for name in names[n % len(names) :] + names[: n % len(names)]:
            flow, url, key = systems[name]
            spec = closed_spec(flow, target(url, body(MODEL), key), clients, duration_s)
            seen[name].append(list(run_load(spec)["outcomes"]))
    return seen


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
        if name != DIRECT
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
        if name not in (NAIVE, DIRECT):
            out[name]["breakdown"] = breakdown(every, UPSTREAM_S)
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
    """Run the rounds, print the summary as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.added", description=__doc__)
    parser.add_argument("--base", type=Path, help="another checkout whose chatq runs beside")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--duration", type=float, default=FULL.compare_duration_s)
    parser.add_argument("--clients", type=int, default=CLIENTS, help="another of the levels")
    args = parser.parse_args(argv)
    lab = Lab(FULL)
    try:
        seen = run(lab, args.base, args.rounds, args.duration, args.clients)
    finally:
        lab.close()
    print(json.dumps(summary(seen), indent=1))


if __name__ == "__main__":
    main()
