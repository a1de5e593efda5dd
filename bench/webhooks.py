"""What a webhook delivery costs a worker, and what receivers that trickle cost other tenants.

`python -m bench.webhooks`, on its own (not a section of `make bench`): one worker process on a
Redis and a fakellm of its own, and a loopback receiver (tests/webhook_receiver.py). (1)
`--deliveries` deliveries made due at once over `--endpoints` endpoints answering 200 at
once: deliveries a second until the receiver has them all, and the worker's CPU per delivery
(psutil), beside its idle CPU. (2) Bob's `POST /v1/jobs?wait=30` one after another, first
with nothing else running, then while alice's endpoints trickle their answers a byte at a time
(as many attempts as the delivery pool holds, each cut at CHATQ_WEBHOOK_TIMEOUT; the key's
cap is raised to the pool's size for that).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import uuid
from typing import Any

import psutil
import redis
import requests

from bench.stats import summary_ms
from chatq.config import settings as config
from chatq.config.settings import Settings
from chatq.webhooks.deliveries import Deliveries
from chatq.webhooks.events import Event
from chatq.webhooks.store import Endpoints
from scripts.localredis import LocalRedis
from tests.procs import (
    ALICE_KEY,
    BOB_KEY,
    Proc,
    base_env,
    start_fakellm,
    start_web,
    start_worker,
    stop_all,
    wait_until,
)
from tests.webhook_receiver import Answer, Receiver

IDLE_S = 10.0


def _cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def throughput(client: redis.Redis, worker: Proc, count: int, endpoints: int) -> dict[str, Any]:
    """Deliveries a second and worker CPU per delivery, `count` due at once."""
    receiver = Receiver()
    try:
        made = Endpoints(client, ())
        targets = [
            made.create("alice", receiver.url(f"/e{n}"), "", ("job.completed",))
            for n in range(endpoints)
        ]
        deliveries = Deliveries(client, 86400)
        proc = psutil.Process(worker.pid)
        before = _cpu_s(proc)
        time.sleep(IDLE_S)
        idle_ms = 1000 * (_cpu_s(proc) - before) / IDLE_S
        started, before = time.monotonic(), _cpu_s(proc)
        for n in range(count):
            event = Event(f"evt_{uuid.uuid4().hex}", "job.completed", int(time.time()), f"j{n}")
            endpoint = targets[n % endpoints]
            assert endpoint is not None
            deliveries.add(f"dlv_{uuid.uuid4().hex}", endpoint, event)
        wait_until(lambda: len(receiver.received) >= count, 600, "all delivered", every_s=0.01)
        took_s = time.monotonic() - started
        cpu_ms = 1000 * (_cpu_s(proc) - before) / count
    finally:
        receiver.stop()
    return {
        "deliveries": count,
        "endpoints": endpoints,
        "per_s": round(count / took_s, 1),
        "worker_cpu_ms_per_delivery": round(cpu_ms, 2),
        "worker_idle_cpu_ms_per_s": round(idle_ms, 1),
    }


def _bobs_jobs(url: str, count: int) -> dict[str, Any]:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {BOB_KEY}"
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    took, statuses = [], []
    for _ in range(count):
        started = time.perf_counter()
        answer = session.post(f"{url}/v1/jobs?wait=30", json=body, timeout=40)
        took.append(time.perf_counter() - started)
        statuses.append(answer.json().get("status"))
    return {"completed": statuses.count("completed"), "of": count, **summary_ms(took)}


def trickling(url: str, settings: Settings, jobs: int) -> dict[str, Any]:
    """Bob's job latency alone, then while alice's endpoints trickle in every delivery slot
    (each endpoint as many attempts as its cap lets run)."""
    quiet = _bobs_jobs(url, jobs)
    slots, cap = settings.webhook_concurrency, settings.webhook_endpoint_concurrency
    receiver = Receiver()
    alice = requests.Session()
    alice.headers["Authorization"] = f"Bearer {ALICE_KEY}"
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    try:
        for n in range(math.ceil(slots / cap)):
            receiver.plan(f"/slow{n}", *[Answer(trickle=True)] * (2 * cap))
            made = alice.post(f"{url}/v1/webhooks", json={"url": receiver.url(f"/slow{n}")})
            for _ in range(cap):
                alice.post(
                    f"{url}/v1/jobs", json=body, headers={"Chatq-Webhook": made.json()["id"]}
                )
        wait_until(lambda: sum(receiver.open_now.values()) >= slots, 60, "attempts trickling")
        busy = _bobs_jobs(url, jobs)
        busy["trickling_at_the_end"] = sum(receiver.open_now.values())
    finally:
        receiver.stop()
    return {"alone": quiet, "beside_trickling": busy}


def main() -> None:
    """Run both measures and print them as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks")
    parser.add_argument("--deliveries", type=int, default=1000)
    parser.add_argument("--endpoints", type=int, default=10)
    parser.add_argument("--pool", choices=("gevent", "threads"), default="gevent")
    parser.add_argument("--jobs", type=int, default=30, help="bob's jobs, each time")
    args = parser.parse_args()
    server = LocalRedis().start()
    fake, fake_url = start_fakellm()
    # One key may take every delivery slot here (the default per-key cap leaves 30 of the 50
    # to other keys): the worst case for the job slots beside them.
    env = base_env(
        server.url,
        fake_url,
        CHATQ_WORKER_POOL=args.pool,
        CHATQ_WEBHOOK_TIMEOUT="60",
        CHATQ_WEBHOOK_KEY_CONCURRENCY="50",
    )
    worker = start_worker(env, server.url)
    web, url = start_web(env)
    try:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        figures = {
            "pool": args.pool,
            "throughput": throughput(client, worker, args.deliveries, args.endpoints),
            "another_tenant": trickling(url, config.load(env), args.jobs),
        }
    finally:
        stop_all([worker, web, fake], 2.0)
        server.stop()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
