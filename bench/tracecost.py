"""`python -m bench.tracecost`: CPU per job of the web and the worker with tracing off and on
(spans exported over OTLP/HTTP to a receiver in this process), and, with `--base DIR`, of the
chatq checked out in DIR (the commit before tracing) beside them; with `--instrumented`, also
with the maintained OpenTelemetry instrumentors (Flask, Celery, requests, urllib3, redis) on,
alone (`inst`) and beside chatq's own spans (`both`): bench/instrumented/sitecustomize.py turns
them on in the children, whose venv must hold those packages (not in chatq's requirements).

Each variant is a fresh stack (its own Redis, one worker, one web) against one shared
fakellm; a round runs every variant in turn (the order reversed every other round), so that a
busier spell of a shared machine falls on every variant alike. In a variant: `WARMUP_JOBS`
jobs, then `--jobs` jobs submitted by `CLIENTS` threads, each with a client's `traceparent`
and `?wait=` until it ends; the CPU seconds of the web's and the worker's process trees over
those jobs, per job. Prints one JSON object: per variant the median over rounds of the
milliseconds per job (web plus worker) and spans exported per job (the warm-up's included),
and the median over rounds of each round's own ratios to `off` (and `off/base`): the variants of
one round shared the machine's load.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import secrets
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

import tests.procs
from bench.procstat import CpuMeter
from bench.stack import ChatqStack, start_chatq
from tests.otlp_receiver import OtlpReceiver
from tests.procs import ALICE_KEY, start_fakellm

INSTRUMENTED = Path(__file__).parent / "instrumented"
WARMUP_JOBS = 50
CLIENTS = 16
BODY = {"model": "fake:tokens=20", "messages": [{"role": "user", "content": "trace cost"}]}


def _job(url: str) -> None:
    headers = {
        "Authorization": f"Bearer {ALICE_KEY}",
        "traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01",
    }
    answer = requests.post(f"{url}/v1/jobs?wait=30", json=BODY, headers=headers, timeout=40)
    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text


def _run_jobs(url: str, jobs: int) -> None:
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda _: _job(url), range(jobs)))


def _env(variant: str, otlp: OtlpReceiver) -> dict[str, str]:
    """`on` and `both` export chatq's own spans; `inst` and `both` the instrumentors'."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url} if variant in ("on", "both") else {}
    if variant in ("inst", "both"):
        path = os.pathsep.join(filter(None, [str(INSTRUMENTED), os.environ.get("PYTHONPATH")]))
        env.update(CHATQ_BENCH_OTLP_URL=otlp.url, PYTHONPATH=path)
    return env


def _start(variant: str, upstream: str, otlp: OtlpReceiver, base: Path | None) -> ChatqStack:
    """The stack of `variant`: `base` runs from the other checkout."""
    root = tests.procs.ROOT
    tests.procs.ROOT = base if variant == "base" and base else root
    try:
        return start_chatq(upstream, **_env(variant, otlp))
    finally:
        tests.procs.ROOT = root


def measure(
    variant: str, upstream: str, otlp: OtlpReceiver, base: Path | None, jobs: int
) -> dict[str, float]:
    """Milliseconds of CPU per job of the web and the worker, and spans per job, for one run
    of `variant`."""
    spans_before = len(otlp.spans)
    stack = _start(variant, upstream, otlp, base)
    try:
        _run_jobs(stack.url, WARMUP_JOBS)
        pids = {"web": stack.web.pid, "worker": stack.workers[0].pid}
        meter = CpuMeter(pids).start()
        _run_jobs(stack.url, jobs)
        used = meter.stop()
    finally:
        stack.stop()
    spans = len(otlp.spans) - spans_before  # the exporters flush as their processes stop
    return {
        **{name: 1000 * used[name]["cpu_s"] / jobs for name in pids},
        "spans": spans / (WARMUP_JOBS + jobs),
    }


def _summary(runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    medians = {
        variant: {
            name: round(statistics.median(r[name] for r in rounds), 3)
            for name in ("web", "worker", "spans")
        }
        for variant, rounds in runs.items()
    }
    for figures in medians.values():
        figures["total"] = round(figures["web"] + figures["worker"], 3)
    totals = {v: [r["web"] + r["worker"] for r in rounds] for v, rounds in runs.items()}
    pairs = [(v, "off") for v in ("on", "inst", "both") if v in runs]
    pairs += [("off", "base")] if "base" in runs else []
    ratios = {
        f"{a}/{b}": round(
            statistics.median(x / y for x, y in zip(totals[a], totals[b], strict=True)), 3
        )
        for a, b in pairs
    }
    return {"per_job": medians, "ratios": ratios, "runs": runs}


def _span_names(otlp: OtlpReceiver) -> dict[str, int]:
    """How many spans of each service and name were received, most first."""
    names = collections.Counter(f"{s.service}: {s.name}" for s in otlp.spans)
    return dict(names.most_common())


def main() -> None:
    """See the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.tracecost")
    parser.add_argument("--jobs", type=int, default=1000, help="measured jobs per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, help="a checkout of chatq before tracing")
    parser.add_argument(
        "--instrumented", action="store_true", help="also the maintained instrumentors on"
    )
    args = parser.parse_args()
    variants = ["off", "on"] + (["inst", "both"] if args.instrumented else [])
    variants += ["base"] if args.base else []
    fake, upstream = start_fakellm()
    otlp = OtlpReceiver()
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    try:
        for round_no in range(args.rounds):
            for variant in variants if round_no % 2 == 0 else variants[::-1]:
                runs[variant].append(measure(variant, upstream, otlp, args.base, args.jobs))
    finally:
        otlp.stop()
        fake.stop()
    report = {**_summary(runs), "jobs": args.jobs, "span_names": _span_names(otlp)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
