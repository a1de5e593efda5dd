"""Issue 14: fair dispatch across tenants.

Two tenants on one worker of 100 slots (10 in quick runs): alice floods 2,000 jobs of 1 s
at once, bob sends one job of 1 s per second from 2 s after the flood began. Bob's wait
(his jobs' `started_at` less `created_at`, both from Redis's clock in the job records) is
compared with his wait when alone, under three dispatch settings, each on a stack of its
own in the same run: fair dispatch (a queue per tenant, read in turn), fair dispatch with
alice's running jobs capped below the slots (CHATQ_TENANT_MAX_RUNNING), and one FIFO queue
per lane (CHATQ_FAIR_DISPATCH=0, chatq before issue 14). Each stack runs several rounds of
"alone, then beside the flood", pooled: bob's p99 is then not one job's wait, and a machine
that drifts moves both sides alike. The capped setting runs twice: with the flood's 16 client
threads on the same cores as chatq, and with them in a process of the idle scheduling class,
which runs only on a core nothing else wants: a stand-in for clients on hosts of their own.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import redis
import requests

from bench.lab import Lab
from bench.stats import ratio, summary_ms
from chatq import keys
from tests.procs import ALICE_KEY, BOB_KEY

CAPPED = {"CHATQ_TENANT_MAX_RUNNING_OVERRIDES": "alice={cap}"}

# Each setting's CHATQ_* on top of the slots ("{cap}": the slots less those left free of the
# flood, so that bob's jobs find a slot at once), and whether the flood's clients run in the
# idle class.
VARIANTS: dict[str, tuple[dict[str, str], bool]] = {
    "fair": ({}, False),
    "fair_capped": (CAPPED, False),
    "fair_capped_clients_idle": (CAPPED, True),
    "fifo": ({"CHATQ_FAIR_DISPATCH": "0"}, False),
}


def _sizes(lab: Lab) -> tuple[int, int, float, int]:
    """(flood jobs, light jobs, seconds per job, worker slots)."""
    return (60, 4, 0.2, 10) if lab.sizes.quick else (2000, 15, 1.0, 100)


def _rounds(lab: Lab) -> int:
    """Rounds of "alone, then beside the flood" on each stack."""
    return 1 if lab.sizes.quick else 3


def _post(session: requests.Session, url: str, job_s: float, text: str) -> str:
    body = {"model": f"fake:ttft={job_s:g}", "messages": [{"role": "user", "content": text}]}
    answer = session.post(f"{url}/v1/jobs", json=body, timeout=30)
    answer.raise_for_status()
    return str(answer.json()["id"])


def _session(key: str) -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    return s


def _flood(url: str, count: int, job_s: float) -> list[str]:
    local = threading.local()

    def one(i: int) -> str:
        if not hasattr(local, "s"):
            local.s = _session(ALICE_KEY)
        return _post(local.s, url, job_s, f"flood {i}")

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(count)))


def _idle_class() -> None:
    """This process's threads, and those it starts, run only on a core nothing else wants."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _submit_flood(
    pool: ThreadPoolExecutor, url: str, count: int, job_s: float, clients_idle: bool
) -> Future[list[str]]:
    """The flood from this process's threads, or from a child process in the idle class."""
    if not clients_idle:
        return pool.submit(_flood, url, count, job_s)
    spawn = multiprocessing.get_context("spawn")
    child = ProcessPoolExecutor(1, mp_context=spawn, initializer=_idle_class)
    done = child.submit(_flood, url, count, job_s)
    done.add_done_callback(lambda _: child.shutdown(wait=False))
    return done


def _light(url: str, count: int, job_s: float, start_s: float) -> list[str]:
    """One job a second (scaled with the job time in quick runs), from `start_s` on."""
    session, every_s = _session(BOB_KEY), job_s
    time.sleep(start_s)
    ids = []
    for i in range(count):
        t0 = time.monotonic()
        ids.append(_post(session, url, job_s, f"light {i}"))
        time.sleep(max(0.0, every_s - (time.monotonic() - t0)))
    return ids


def _waits_s(client: redis.Redis, ids: list[str], timeout_s: float) -> list[float]:
    """Each job's wait in the queue, once all have started."""
    deadline = time.monotonic() + timeout_s
    while True:
        pipe = client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(keys.job(job_id), "created_at", "started_at")
        rows = pipe.execute()
        if all(started for _, started in rows) or time.monotonic() > deadline:
            return [float(s) - float(c) for c, s in rows if s]
        time.sleep(0.5)


def _created_span_s(client: redis.Redis, ids: list[str]) -> float:
    """Seconds from the first of these jobs' `created_at` to the last: the submissions' span."""
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(keys.job(job_id), "created_at")
    created = [float(c) for c in pipe.execute() if c]
    return max(created) - min(created)


def _round(lab: Lab, url: str, client: redis.Redis, clients_idle: bool) -> tuple[list[float], ...]:
    """Bob alone, then beside alice's flood once it has ended: (bob's waits alone, his waits
    beside the flood, the flood's waits, [the flood's submissions' span])."""
    flood_n, light_n, job_s, slots = _sizes(lab)
    alone = _waits_s(client, _light(url, light_n, job_s, 0.0), 60)
    with ThreadPoolExecutor(2) as pool:
        flood = _submit_flood(pool, url, flood_n, job_s, clients_idle)
        light = pool.submit(_light, url, light_n, job_s, 2 * job_s)
        flood_ids, light_ids = flood.result(), light.result()
    timeout_s = flood_n * job_s / slots * 3 + 60
    during = _waits_s(client, light_ids, timeout_s)
    flood_waits = _waits_s(client, flood_ids, timeout_s)
    time.sleep(2 * job_s)  # the flood's last jobs end before the next round's bob alone
    return alone, during, flood_waits, [_created_span_s(client, flood_ids)]


def _variant(lab: Lab, name: str, env: dict[str, str], clients_idle: bool) -> dict[str, Any]:
    _, _, _, slots = _sizes(lab)
    cap = str(slots - max(2, slots // 10))
    env = {k: v.format(cap=cap) for k, v in env.items()}
    env["CHATQ_WORKER_CONCURRENCY"] = str(slots)
    stack = lab.chatq(f"fairness-{name}", None, 1, **env)
    client = stack.client()
    try:
        rounds = [_round(lab, stack.url, client, clients_idle) for _ in range(_rounds(lab))]
    finally:
        lab.drop(f"fairness-{name}")
    alone_ms = summary_ms([w for r in rounds for w in r[0]])
    during_ms = summary_ms([w for r in rounds for w in r[1]])
    return {
        "env": env,
        "flood_clients_idle_class": clients_idle,
        "rounds": len(rounds),
        "alone": alone_ms,
        "with_flood": during_ms,
        "per_round_p50_ms": [[summary_ms(r[i])["p50_ms"] for i in (0, 1)] for r in rounds],
        "flood": summary_ms([w for r in rounds for w in r[2]]),
        "flood_submitted_in_s": [round(r[3][0], 2) for r in rounds],
        "p50_ratio": ratio(during_ms["p50_ms"], alone_ms["p50_ms"]),
        "p99_ratio": ratio(during_ms["p99_ms"], alone_ms["p99_ms"]),
    }


def run(lab: Lab) -> dict[str, Any]:
    """Each dispatch setting on a stack of its own, in turn."""
    flood_n, light_n, job_s, slots = _sizes(lab)
    out: dict[str, Any] = {
        "slots": slots,
        "flood_jobs": flood_n,
        "light_jobs": light_n,
        "job_s": job_s,
    }
    for name, (env, clients_idle) in VARIANTS.items():
        out[name] = _variant(lab, name, env, clients_idle)
    return out
