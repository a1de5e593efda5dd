"""Issue 16: a 10,000-line batch against fakellm: lines/s, time to its first and last line, and
interactive latency measured while it runs against the same system idle (target: p99 within
20 %). On one worker for both lanes the idle probe runs before the batch and again after it,
pooled; with a worker per lane, in turns with the batch (batchturns.py). Either way a machine
that drifts during the run moves both sides alike."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import requests

from bench.lab import Lab
from bench.loadrun import LoadRun, run_load
from bench.sections import batchturns
from bench.sections.common import JSON, body, latencies_s, open_spec, outcome_summary, target
from bench.stack import ChatqStack
from bench.stats import ratio, summary_ms
from chatq import keys
from tests.procs import ALICE_KEY, start_fakellm, start_worker

# Lines wait on the upstream as real ones do (1 s), so that the worker's slots, not its CPU,
# bound the batch: what the interactive lane must get through.
LINE_MODEL = "fake:ttft=1"
SLOTS = 100
MAX_QUEUED = 80  # lines in flight: 20 slots stay free for the interactive lane
# The same 100 slots as a pool per lane (CHATQ_WORKER_LANES): 20 interactive, 80 batch.
INTERACTIVE_SLOTS = SLOTS - MAX_QUEUED
STACKS = [
    ("batch", {"CHATQ_WORKER_CONCURRENCY": str(SLOTS), "CHATQ_BATCH_MAX_QUEUED": str(MAX_QUEUED)}),
    (
        "batch-lanes",
        {
            "CHATQ_WORKER_CONCURRENCY": str(INTERACTIVE_SLOTS),
            "CHATQ_WORKER_LANES": "interactive",
            "CHATQ_BATCH_MAX_QUEUED": str(MAX_QUEUED),
        },
    ),
]


def _sizes(lab: Lab) -> tuple[int, float, float, float]:
    """(lines, interactive probes per second, seconds of each idle probe, seconds of the probe
    during the batch: within its run, which takes ~160 s; in turns, twice that, half of it
    paused)."""
    return (300, 5.0, 2.0, 4.0) if lab.sizes.quick else (10000, 10.0, 60.0, 120.0)


def _session() -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {ALICE_KEY}"
    return s


def _start_batch(url: str, lines: int) -> tuple[str, float]:
    """Upload `lines` requests and create their batch: (batch id, its Redis creation time)."""
    data = "".join(
        json.dumps(
            {
                "custom_id": f"l{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": body(LINE_MODEL, f"line {i}"),
            }
        )
        + "\n"
        for i in range(lines)
    ).encode()
    s = _session()
    uploaded = s.post(
        f"{url}/v1/files",
        files={"file": ("lines.jsonl", data)},
        data={"purpose": "batch"},
        timeout=120,
    )
    uploaded.raise_for_status()
    created = s.post(
        f"{url}/v1/batches",
        timeout=30,
        json={
            "input_file_id": uploaded.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        },
    )
    created.raise_for_status()
    return created.json()["id"], float(created.json()["created_at"])


def _watch_depth(url: str, stop: threading.Event, seen: list[int]) -> None:
    """The `batch` lane's depth, sampled until `stop`."""
    s = _session()
    while not stop.wait(0.5):
        try:
            seen.append(s.get(f"{url}/v1/queue", timeout=10).json()["queues"]["batch"]["depth"])
        except requests.RequestException:
            continue


def _wait_ended(url: str, batch_id: str, timeout_s: float) -> JSON:
    s, deadline = _session(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch: JSON = s.get(f"{url}/v1/batches/{batch_id}", params={"wait": 30}, timeout=60).json()
        if batch["status"] in ("completed", "failed", "cancelled", "expired"):
            return batch
    raise TimeoutError(f"batch {batch_id} did not end within {timeout_s} s")


def _line_times(stack: ChatqStack, batch: JSON, created_at: float) -> JSON:
    """First and last line's end, from their jobs' records (Redis time, as created_at)."""
    text = (
        _session().get(f"{stack.url}/v1/files/{batch['output_file_id']}/content", timeout=120).text
    )
    ids = [json.loads(line)["response"]["request_id"] for line in text.splitlines() if line]
    client = stack.client()
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(keys.job(job_id), "completed_at")
    ends = sorted(float(t) - created_at for t in pipe.execute() if t)
    client.close()
    if not ends:
        return {"first_line_s": None, "last_line_s": None, "lines_per_s": None}
    return {
        "first_line_s": round(ends[0], 2),
        "last_line_s": round(ends[-1], 2),
        "lines_per_s": round(len(ends) / ends[-1], 1) if ends[-1] > 0 else None,
    }


def run(lab: Lab) -> dict[str, Any]:
    """Interactive latency idle, then with a batch running beside it, on one worker serving
    both lanes (idle measured before and after the batch); then on a worker per lane with the
    same slots, in interleaved turns (the batch worker paused and resumed, batchturns.py), the
    batch worker at normal CPU priority, then in Linux's idle class (`chrt --idle 0`: it runs
    only when nothing else wants the CPU, and any other process that wakes takes the CPU from
    it), then in that class with an upstream of its own; last, a CPU burner instead of a
    batch, for what any busy process costs here."""
    shared = _measure(lab, lab.chatq("batch", None, 1, **STACKS[0][1]))
    lab.drop("batch")
    idle_class = ("chrt", "--idle", "0")
    return {
        **shared,
        "worker_per_lane": _per_lane(lab, ()),
        "worker_per_lane_idle_class": _per_lane(lab, idle_class),
        "batch_pool_apart": _batch_pool_apart(lab, idle_class),
        "cpu_burner_control": _control(lab),
    }


def _control(lab: Lab) -> dict[str, Any]:
    """The same turns with no batch: a CPU burner in the idle class paused and resumed
    instead, so that what any busy process costs the probe on these cores shows apart from
    what the batch's work in Redis, the web and the upstream costs it."""
    stack = lab.chatq("batch-lanes", None, 1, **STACKS[1][1])
    try:
        with batchturns.cpu_burner() as pid:
            sides = _probe_in_turns(lab, stack, pid)
    finally:
        lab.drop("batch-lanes")
    return {
        "turn_s": sides["turn_s"],
        "turns": sides["turns"],
        "idle": sides["paused"],
        "burning": sides["running"],
        "p99_ratio": ratio(
            sides["running"]["latency"]["p99_ms"], sides["paused"]["latency"]["p99_ms"]
        ),
        "left_out": sides["left_out"],
        "errors": sides["errors"],
    }


def _probe_in_turns(lab: Lab, stack: ChatqStack, pid: int) -> JSON:
    """The interactive probe on `stack` while process `pid` is paused and resumed in turns:
    batchturns.split's sides, with the turns' length and count."""
    _, rate, _, during_s = _sizes(lab)
    turn_s = 1.0 if lab.sizes.quick else 10.0
    interactive = target(stack.url, body("fake", "interactive"))
    probe = LoadRun(open_spec("chatq", interactive, rate, 2 * during_s))
    try:
        switches = batchturns.take_turns(pid, 2 * during_s, turn_s)
        sides = batchturns.split(probe.result()["outcomes"], switches, turn_s)
    finally:
        probe.stop()
    return {**sides, "turn_s": turn_s, "turns": len(switches)}


def _per_lane(
    lab: Lab, batch_prefix: tuple[str, ...], batch_upstream: str | None = None
) -> dict[str, Any]:
    """The interleaved measure on an interactive worker and a batch worker (run through
    `batch_prefix`; calling `batch_upstream` when given, else the stack's upstream)."""
    env = {**STACKS[1][1], "CHATQ_LEASE": str(batchturns.PAUSABLE_LEASE_S)}
    stack = lab.chatq("batch-lanes", None, 1, **env)
    batch_env = {"CHATQ_WORKER_LANES": "batch", "CHATQ_WORKER_CONCURRENCY": str(MAX_QUEUED)}
    if batch_upstream:
        batch_env["CHATQ_UPSTREAM_URLS"] = batch_upstream
    batch_worker = start_worker({**stack.env, **batch_env}, stack.redis.url, batch_prefix)
    stack.workers.append(batch_worker)
    try:
        measured = _in_turns(lab, stack, batch_worker.pid)
    finally:
        lab.drop("batch-lanes")
    return {**measured, "interactive_slots": INTERACTIVE_SLOTS, "batch_prefix": list(batch_prefix)}


def _batch_pool_apart(lab: Lab, prefix: tuple[str, ...]) -> dict[str, Any]:
    """A worker per lane whose batch worker calls a fakellm of its own, both run through
    `prefix`: a batch pool and its upstream on hosts of their own, as far as one host can
    show it. Only Redis and the web are left shared with the interactive lane."""
    proc, url = start_fakellm(prefix=prefix)
    try:
        measured = _per_lane(lab, prefix, url)
        stats = requests.get(url.removesuffix("/v1") + "/stats", timeout=5).json()
    finally:
        proc.stop()
    return {**measured, "batch_upstream_requests": stats["requests"]}


def _in_turns(lab: Lab, stack: ChatqStack, batch_pid: int) -> dict[str, Any]:
    """The probe throughout a batch's run in turns of running and paused, on `stack`."""
    lines, _, _, during_s = _sizes(lab)
    batch_id, created_at = _start_batch(stack.url, lines)
    sides = _probe_in_turns(lab, stack, batch_pid)
    batch = _wait_ended(stack.url, batch_id, timeout_s=lines + 300)
    times = _line_times(stack, batch, created_at)
    idle, during = sides.pop("paused"), sides.pop("running")
    if times["last_line_s"]:  # the batch's own speed: its time less the pauses
        running_s = times["last_line_s"] - sides["paused_s"]
        times["lines_per_s"] = round(batch["request_counts"]["completed"] / running_s, 1)
    return {
        "lines": lines,
        "status": batch["status"],
        "request_counts": batch["request_counts"],
        **times,
        **sides,
        "probe_within_batch": times["last_line_s"] is not None
        and times["last_line_s"] > 2 * during_s,
        "interactive_idle": idle,
        "interactive_during": during,
        "interactive_p99_ratio": ratio(during["latency"]["p99_ms"], idle["latency"]["p99_ms"]),
    }


def _idle(before: JSON, after: JSON) -> JSON:
    """The idle probes before and after the batch, pooled; each one's p99 beside."""
    pooled, later = outcome_summary(before), outcome_summary(after)
    pooled["p99_before_after_ms"] = [pooled["latency"]["p99_ms"], later["latency"]["p99_ms"]]
    pooled["latency"] = summary_ms(latencies_s(before["outcomes"] + after["outcomes"]))
    pooled["errors"] += later["errors"]
    return pooled


def _measure(lab: Lab, stack: ChatqStack) -> dict[str, Any]:
    """The interactive probe idle, during a batch on `stack`, and idle again."""
    lines, rate, idle_s, during_s = _sizes(lab)
    interactive = target(stack.url, body("fake", "interactive"))
    idle_before = run_load(open_spec("chatq", interactive, rate, idle_s))
    batch_id, created_at = _start_batch(stack.url, lines)
    stop, depths = threading.Event(), list[int]()
    watcher = threading.Thread(target=_watch_depth, args=(stack.url, stop, depths), daemon=True)
    watcher.start()
    during_run = LoadRun(open_spec("chatq", interactive, rate, during_s))
    try:
        during = outcome_summary(during_run.result())
    finally:
        during_run.stop()
    batch = _wait_ended(stack.url, batch_id, timeout_s=lines + 300)
    stop.set()
    idle = _idle(idle_before, run_load(open_spec("chatq", interactive, rate, idle_s)))
    times = _line_times(stack, batch, created_at)
    return {
        "lines": lines,
        "line_model": LINE_MODEL,
        "slots": SLOTS,
        "max_queued": MAX_QUEUED,
        "status": batch["status"],
        "request_counts": batch["request_counts"],
        **times,
        "probe_within_batch": times["last_line_s"] is not None and times["last_line_s"] > during_s,
        "max_batch_lane_depth": max(depths, default=None),
        "interactive_idle": idle,
        "interactive_during": during,
        "interactive_p99_ratio": ratio(during["latency"]["p99_ms"], idle["latency"]["p99_ms"]),
    }
