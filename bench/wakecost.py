"""`python -m bench.wakecost [--base DIR]`: the instructions one web process runs per woken
long-poll (valgrind's callgrind), of this checkout and, with `--base DIR`, of the chatq checked
out in DIR, in turns. Instruction counts do not move with a shared machine's load, as CPU
seconds and wakes a second do; they count user space only (not the kernel's part of a send).

Per checkout and round, a stack of its own (its own Redis, no worker; fakellm shared):
`python -m web` under `valgrind --tool=callgrind --instr-atstart=no`; `--waiters` jobs created
and claimed through the Store, a `GET /v1/jobs/{id}?wait=110` parked on each (the waiters
section's load generator), then counting on (`callgrind_control -i on`) while all the jobs are
ended at once and answered, and off again. A first burst warms the process and is not counted.
Prints one JSON object: per checkout, the instructions per wake of each round.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import requests

import tests.procs
from bench.completer import chatq_finisher, chatq_store, create_running, finish_burst
from bench.lab import MAIN_ENV
from bench.procstat import serving_pid
from bench.sections.waiters import TTL_S, WAIT_S, park, wake_stats
from scripts.localredis import LocalRedis
from tests.procs import Proc, base_env, launch_web, start_fakellm, wait_until

START_S = 300  # the web's start under valgrind: imports run some 50 times slower


def _control(pid: int, *args: str) -> None:
    """`callgrind_control ARGS PID`: instrumentation on or off, or a dump."""
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def _burst(url: str, pid: int, redis_url: str, waiters: int, counted: bool) -> int:
    """Park `waiters` long-polls, end their jobs at once, wait for the answers; errors."""
    store = chatq_store(redis_url, TTL_S)
    runs = create_running(store, waiters)
    load, _ = park(url, "chatq", [r[0] for r in runs], pid)
    if counted:
        _control(pid, "-i", "on")
    stamps = finish_burst(chatq_finisher(store), runs)
    errors = int(wake_stats(load.result(WAIT_S + 300)["answers"], stamps)["errors"])
    if counted:
        _control(pid, "-i", "off")
        _control(pid, "-d")
    return errors


def _counted(folder: Path, pid: int) -> int:
    """The instructions of `pid`'s dumps."""
    total = 0
    for dump in folder.glob(f"cg.{pid}*"):
        for line in dump.read_text(errors="replace").splitlines():
            if line.startswith("totals:"):
                total += int(line.split()[1])
    return total


def _web(root: Path, redis_url: str, upstream: str, folder: Path) -> tuple[Proc, str]:
    """`python -m web` of the checkout at `root`, under callgrind, counting nothing yet."""
    valgrind = (
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--trace-children=yes",
        f"--callgrind-out-file={folder}/cg.%p",
    )
    env = base_env(redis_url, upstream, **{**MAIN_ENV, "CHATQ_MAX_WAIT": "120"})
    env["CHATQ_JOB_TTL"] = str(TTL_S)
    ours = tests.procs.ROOT
    tests.procs.ROOT = root
    try:
        proc, url = launch_web(env, prefix=valgrind)
    finally:
        tests.procs.ROOT = ours
    wait_until(lambda: requests.get(url + "/healthz", timeout=5).ok, START_S, "web")
    return proc, url


def measure(root: Path, upstream: str, waiters: int) -> float:
    """Instructions per wake of the web of the checkout at `root`."""
    server = LocalRedis().start()
    with tempfile.TemporaryDirectory(prefix="chatq-wakecost-") as folder:
        proc, url = _web(root, server.url, upstream, Path(folder))
        try:
            pid = serving_pid(proc.pid)
            _burst(url, pid, server.url, waiters, counted=False)
            errors = _burst(url, pid, server.url, waiters, counted=True)
            if errors:
                raise RuntimeError(f"{errors} long-polls were not answered")
            return round(_counted(Path(folder), pid) / waiters)
        finally:
            proc.stop(30)
            server.stop()


def main() -> None:
    """Each checkout in turn, `--rounds` times; the instructions per wake of each round."""
    parser = argparse.ArgumentParser(prog="python -m bench.wakecost", description=__doc__)
    parser.add_argument("--base", type=Path, help="another checkout of chatq, measured beside")
    parser.add_argument("--waiters", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    roots = {"this": tests.procs.ROOT, **({"base": args.base.resolve()} if args.base else {})}
    fakellm, upstream = start_fakellm()
    out: dict[str, list[float]] = {name: [] for name in roots}
    try:
        for _ in range(args.rounds):
            for name, root in roots.items():
                out[name].append(measure(root, upstream, args.waiters))
    finally:
        fakellm.stop()
    print(json.dumps({"waiters": args.waiters, "instructions_per_wake": out}))


if __name__ == "__main__":
    main()
