"""What many unfinished batches of one key cost the workers' batch loop (issue 34, M3).

`python -m bench.batchmany`: one worker (100 slots, CHATQ_BATCH_MAX_QUEUED 80) on a Redis
and a fakellm of its own. Idle, then while `--batches` batches of alice's run (`--lines`
lines each, of 5 s: they stay unfinished through the window): the worker's CPU over
`--window` seconds, and the latency of bob's interactive jobs (one at a time, an instant
model, POST /v1/jobs with `wait`). `--batches 1 --lines 2000` is the control: the same
lines, 16 a second, in one batch.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench.procstat import cpu_seconds
from bench.stats import summary_ms
from scripts.localredis import LocalRedis
from tests.batchkit import create_batch, jsonl, request_line, session, upload
from tests.conftest import Stack, start_stack
from tests.procs import BOB_KEY, start_fakellm, wait_until

LINE_MODEL = "fake:ttft=5"


def probe(stack: Stack, window_s: float) -> dict[str, Any]:
    """The worker's CPU (% of a core) and bob's job latencies over `window_s`."""
    worker = next(p for p in stack.procs if p.name == "worker")
    bob = session(BOB_KEY)
    latencies_s: list[float] = []
    cpu_before, start = cpu_seconds(worker.pid), time.monotonic()
    while time.monotonic() - start < window_s:
        sent = time.perf_counter()
        body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
        r = bob.post(f"{stack.url}/v1/jobs", json=body, params={"wait": 10}, timeout=30)
        assert r.ok and r.json()["status"] == "completed", r.text
        latencies_s.append(time.perf_counter() - sent)
        time.sleep(0.05)
    cpu_pct = 100 * (cpu_seconds(worker.pid) - cpu_before) / (time.monotonic() - start)
    return {"worker_cpu_pct": round(cpu_pct, 1), "bob_ms": summary_ms(latencies_s)}


def _start_batches(stack: Stack, count: int, lines: int) -> None:
    """`count` batches of alice's of `lines` lines, each validated and in progress."""
    data = jsonl([request_line(f"l{i}", f"line {i}", LINE_MODEL) for i in range(lines)])
    file_id = upload(stack.url, data).json()["id"]
    for _ in range(count):
        created = create_batch(stack.url, file_id)
        assert created.ok, created.text

    def all_running() -> bool:
        q = session().get(f"{stack.url}/v1/queue", timeout=30).json()["batches"]
        return bool(q["active"] == count and q["lines"]["total"] == count * lines)

    wait_until(all_running, 120, "every batch validated")


def run(batches: int, lines: int, window_s: float) -> dict[str, Any]:
    """The probe idle, then with `batches` unfinished batches of `lines` lines."""
    server = LocalRedis().start()
    fake, fake_url = start_fakellm()
    stack = start_stack(
        server.url,
        fake_url,
        CHATQ_BATCH_MAX_QUEUED="80",
        CHATQ_BATCH_MAX_ACTIVE_PER_KEY=str(batches),
    )
    try:
        idle = probe(stack, window_s)
        _start_batches(stack, batches, lines)
        busy = probe(stack, window_s)
        shape = {"batches": batches, "lines": lines, "window_s": window_s}
        return shape | {"idle": idle, "busy": busy}
    finally:
        stack.stop()
        fake.stop()
        server.stop()


def main() -> None:
    """Parse the arguments, run, print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--lines", type=int, default=10, help="lines of each batch")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of each probe")
    args = parser.parse_args()
    print(json.dumps(run(args.batches, args.lines, args.window), indent=2))


if __name__ == "__main__":
    main()
