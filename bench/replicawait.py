"""What CHATQ_REDIS_MIN_REPLICAS costs, and how long a Sentinel failover keeps writes away.

`python -m bench.replicawait`: a primary, two replicas and three Sentinels on loopback
(scripts/localsentinel.py). (1) The store's accept and end of a job (create, claim, finish)
through the Sentinel-managed client, one job at a time, with WAIT for 0, 1 and 2 replicas,
the three interleaved in rounds so that machine noise falls on each alike. (2) The primary
SIGKILLed while a client creates a job every 10 ms: seconds from the kill to the Sentinels
naming a new primary, and to the first create that went through.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

from bench.stats import percentile, ratio, summary_ms
from chatq.config import settings as config
from chatq.jobs import record as jobs
from chatq.jobs.store import Store
from chatq.topology import connections as redis_conn
from chatq.topology.replicas import Replication
from scripts.localsentinel import LocalSentinel

WAITS = (0, 1, 2)


def _one_job(store: Store) -> tuple[float, float]:
    """Seconds of the create, and of the claim + finish, of one job."""
    job_id = "job_" + uuid.uuid4().hex
    record = jobs.new_record(job_id, "bench", "fake", "interactive", {}, time.time())
    started = time.perf_counter()
    store.create(record=record, lease_s=10)
    created = time.perf_counter()
    store.claim(job_id=job_id, run_id="r", lease_s=10)
    store.finish(job_id=job_id, run_id="r", status=jobs.COMPLETED, fields={"result": "{}"})
    return created - started, time.perf_counter() - created


def wait_cost(servers: LocalSentinel, rounds: int, per_round: int) -> dict[str, object]:
    """Create and claim+finish latency with WAIT for 0, 1 and 2 replicas."""
    client = redis_conn.connect_sentinel(config.load(servers.env), max_connections=4)
    stores = {n: Store(client, 600, replication=Replication(n, 1000)) for n in WAITS}
    samples: dict[int, tuple[list[float], list[float]]] = {n: ([], []) for n in WAITS}
    for n in WAITS:  # warm: scripts loaded, connection made
        _one_job(stores[n])
    for _ in range(rounds):
        for n in WAITS:
            for _ in range(per_round):
                create_s, end_s = _one_job(stores[n])
                samples[n][0].append(create_s)
                samples[n][1].append(end_s)
    result: dict[str, object] = {
        f"replicas_{n}": {"create": summary_ms(c), "claim_finish": summary_ms(e)}
        for n, (c, e) in samples.items()
    }
    p50_ms = {n: percentile(samples[n][0], 50) for n in WAITS}
    result["create_p50_ratio"] = {f"replicas_{n}": ratio(p50_ms[n], p50_ms[0]) for n in WAITS}
    return result


def failover_s(servers: LocalSentinel) -> dict[str, float]:
    """The primary SIGKILLed under a create every 10 ms: seconds to promotion and to the
    first create that went through afterwards."""
    client = redis_conn.connect_sentinel(config.load(servers.env), max_connections=4)
    store = Store(client, 600)
    _one_job(store)
    killed = time.monotonic()
    victim_port = servers.primary_port()
    servers.server_at(victim_port or 0).stop(kill=True)
    promoted = written = 0.0
    while not (promoted and written):
        if not promoted and servers.primary_port() not in (victim_port, None):
            promoted = time.monotonic() - killed
        if not written:
            try:
                _one_job(store)
                if redis_conn.primary_address(client) != f"127.0.0.1:{victim_port}":
                    written = time.monotonic() - killed
            except Exception as exc:  # a backend error here means "not yet"
                if not redis_conn.is_backend_error(exc):
                    raise
        time.sleep(0.01)
    return {"promoted_s": round(promoted, 2), "first_write_s": round(written, 2)}


def main() -> None:
    """Print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-round", type=int, default=200)
    parser.add_argument("--failovers", type=int, default=3)
    args = parser.parse_args()
    servers = LocalSentinel().start()
    try:
        figures: dict[str, object] = {"wait": wait_cost(servers, args.rounds, args.per_round)}
    finally:
        servers.stop()
    runs = []
    for _ in range(args.failovers):
        servers = LocalSentinel().start()
        try:
            runs.append(failover_s(servers))
        finally:
            servers.stop()
    figures["failover"] = runs
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
