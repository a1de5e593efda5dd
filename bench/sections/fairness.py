"""Issue 14: fair dispatch across tenants.

Two tenants on two workers of 50 slots each (5 in quick runs), one worker process per core:
alice floods 2,000 jobs of 1 s at once, bob sends one job of 1 s per second from 2 s after
the flood began. Bob's wait (his jobs' `started_at` less `created_at`, both from Redis's clock
in the job records) is compared with his wait when alone, under three dispatch settings, each
on a stack of its own in the same run: fair dispatch (a queue per tenant, read in turn), fair
dispatch with alice's running jobs capped below the slots (CHATQ_TENANT_MAX_RUNNING), and one
FIFO queue per lane (CHATQ_FAIR_DISPATCH=0, chatq before issue 14). A fourth stack repeats the
capped one with the flood's jobs lasting 0.5 to 1.5 times the job time (mean: the job time):
jobs that all last 1 s start and end in waves, once a second, and this shows what the waves
cost bob. Each stack runs six rounds of "alone, then beside the flood", pooled: over 100 of
bob's jobs a side, so that his p99 is not simply his slowest job, and a machine that drifts
moves both sides alike. Bob's waits beside the flood are also split in two: his jobs made
while the flood's submissions were still coming in, and those made after the last.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis
import requests

from bench.lab import Lab
from bench.stats import ratio, summary_ms
from chatq import keys
from tests.procs import ALICE_KEY, BOB_KEY

# Each setting's CHATQ_* on top of the slots; "{cap}": the slots less those left free of the
# flood, so that bob's jobs find a slot at once.
CAPPED = {"CHATQ_TENANT_MAX_RUNNING_OVERRIDES": "alice={cap}"}
VARIANTS = {
    "fair": {},
    "fair_capped": CAPPED,
    "fifo": {"CHATQ_FAIR_DISPATCH": "0"},
    "fair_capped_varied": CAPPED,
}
# How far each of the flood's jobs may be from the job time, as a share of it (a seeded draw).
SPREAD = {"fair_capped_varied": 0.5}


# One gevent worker per core: a worker is one event loop, and bob's message waited behind
# each wave of the flood's ends and starts in it (one worker: p99 19.1 ms beside the flood
# against 7.8 ms with two, the same day; CHANGELOG.md, 2026-12-04).
WORKERS = 2


def _sizes(lab: Lab) -> tuple[int, int, float, int]:
    """(flood jobs, light jobs per round, seconds per job, worker slots in all)."""
    return (60, 4, 0.2, 10) if lab.sizes.quick else (2000, 17, 1.0, 100)


def _rounds(lab: Lab) -> int:
    """Rounds of "alone, then beside the flood" on each stack."""
    return 1 if lab.sizes.quick else 6


def _post(session: requests.Session, url: str, job_s: float, text: str) -> str:
    body = {"model": f"fake:ttft={job_s:g}", "messages": [{"role": "user", "content": text}]}
    answer = session.post(f"{url}/v1/jobs", json=body, timeout=30)
    answer.raise_for_status()
    return str(answer.json()["id"])


def _session(key: str) -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    return s


def _flood(url: str, count: int, job_s: float, spread: float) -> list[str]:
    local = threading.local()
    draw = random.Random(14)
    times_s = [round(job_s * (1 + draw.uniform(-spread, spread)), 3) for _ in range(count)]

    def one(i: int) -> str:
        if not hasattr(local, "s"):
            local.s = _session(ALICE_KEY)
        return _post(local.s, url, times_s[i], f"flood {i}")

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(count)))


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


def _times_s(client: redis.Redis, ids: list[str], timeout_s: float) -> list[tuple[float, float]]:
    """Each job's (`created_at`, `started_at`), once all have started (or the time is out)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pipe = client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(keys.job(job_id), "created_at", "started_at")
        rows = pipe.execute()
        if all(started for _, started in rows) or time.monotonic() > deadline:
            return [(float(c), float(s)) for c, s in rows if s]
        time.sleep(0.5)


def _waits(times: list[tuple[float, float]]) -> list[float]:
    """Each (created, started) pair's wait."""
    return [started - created for created, started in times]


@dataclass
class Round:
    """One round's waits, in seconds."""

    alone: list[float]  # bob's, with no flood
    submitting: list[float]  # bob's beside the flood, made while it was still being submitted
    after: list[float]  # bob's beside the flood, made after its last submission
    flood: list[float]  # alice's
    flood_submitted_in_s: float  # from the flood's first `created_at` to its last

    @property
    def during(self) -> list[float]:
        """Bob's waits beside the flood."""
        return self.submitting + self.after


def _round(lab: Lab, url: str, client: redis.Redis, spread: float) -> Round:
    """Bob alone, then beside alice's flood, once the flood has ended."""
    flood_n, light_n, job_s, slots = _sizes(lab)
    alone = _waits(_times_s(client, _light(url, light_n, job_s, 0.0), 60))
    with ThreadPoolExecutor(2) as pool:
        flood = pool.submit(_flood, url, flood_n, job_s, spread)
        light = pool.submit(_light, url, light_n, job_s, 2 * job_s)
        flood_ids, light_ids = flood.result(), light.result()
    timeout_s = flood_n * job_s / slots * 3 + 60
    during = _times_s(client, light_ids, timeout_s)
    flood_times = _times_s(client, flood_ids, timeout_s)
    time.sleep((2 + spread) * job_s)  # the flood's last jobs end before the next round's bob alone
    first_s, last_s = min(c for c, _ in flood_times), max(c for c, _ in flood_times)
    return Round(
        alone=alone,
        submitting=_waits([(c, s) for c, s in during if c <= last_s]),
        after=_waits([(c, s) for c, s in during if c > last_s]),
        flood=_waits(flood_times),
        flood_submitted_in_s=last_s - first_s,
    )


def _variant(lab: Lab, name: str, env: dict[str, str]) -> dict[str, Any]:
    _, _, _, slots = _sizes(lab)
    cap = str(slots - max(2, slots // 10))
    env = {k: v.format(cap=cap) for k, v in env.items()}
    env["CHATQ_WORKER_CONCURRENCY"] = str(slots // WORKERS)
    stack = lab.chatq(f"fairness-{name}", None, WORKERS, **env)
    client, spread = stack.client(), SPREAD.get(name, 0.0)
    try:
        rounds = [_round(lab, stack.url, client, spread) for _ in range(_rounds(lab))]
    finally:
        lab.drop(f"fairness-{name}")
    return {"env": env, "flood_spread": spread, **_pooled(rounds)}


def _pooled(rounds: list[Round]) -> dict[str, Any]:
    """The rounds' waits pooled, in milliseconds, and their ratios."""
    alone_ms = summary_ms([w for r in rounds for w in r.alone])
    during_ms = summary_ms([w for r in rounds for w in r.during])
    return {
        "rounds": len(rounds),
        "alone": alone_ms,
        "with_flood": during_ms,
        "with_flood_while_submitted": summary_ms([w for r in rounds for w in r.submitting]),
        "with_flood_after_submitted": summary_ms([w for r in rounds for w in r.after]),
        "per_round_p50_ms": [
            [summary_ms(w)["p50_ms"] for w in (r.alone, r.during)] for r in rounds
        ],
        "flood": summary_ms([w for r in rounds for w in r.flood]),
        "flood_submitted_in_s": [round(r.flood_submitted_in_s, 2) for r in rounds],
        "p50_ratio": ratio(during_ms["p50_ms"], alone_ms["p50_ms"]),
        "p99_ratio": ratio(during_ms["p99_ms"], alone_ms["p99_ms"]),
    }


def run(lab: Lab) -> dict[str, Any]:
    """Each dispatch setting on a stack of its own, in turn."""
    flood_n, light_n, job_s, slots = _sizes(lab)
    out: dict[str, Any] = {
        "slots": slots,
        "workers": WORKERS,
        "flood_jobs": flood_n,
        "light_jobs": light_n,
        "job_s": job_s,
    }
    for name, env in VARIANTS.items():
        out[name] = _variant(lab, name, env)
    return out
