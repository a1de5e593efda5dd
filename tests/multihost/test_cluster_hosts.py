"""Scenario 6 of "Prove it across hosts": the job store on a 3-primary Redis Cluster whose
nodes run on three hosts (redis-a, -b, -c; each primary's replica on the next host), the broker
on a plain Redis on redis-a: the pipeline across web hosts, then a whole Redis host lost."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from redis.crc import key_slot

from chatq import keys
from scripts.localcluster import SLOTS
from tests.multihost.client import all_terminal, long_poll, submit
from tests.multihost.site import WEBS, Site, running_site
from tests.procs import sse_events, wait_until

# `long`: started first in `make test-slow`, where these files are one unit (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.long]


def test_the_pipeline_on_a_cluster_spread_over_three_hosts() -> None:
    """Jobs land on all three primaries' hosts; each is long-polled, followed by SSE or
    cancelled on the web host it was not submitted on."""
    with running_site(store="cluster") as site:
        with ThreadPoolExecutor(8) as pool:
            done = list(
                pool.map(lambda i: submit(site, WEBS[i % 2], f"c {i}", "fake", 20), range(40))
            )
        assert Counter(job["status"] for job in done) == {"completed": 40}
        nodes = {site.state.get_node_from_key(keys.job(job["id"])).host for job in done}
        assert len(nodes) == 3, nodes  # 40 jobs in 64 shards land on every primary's host
        streamed = submit(site, "web-1", "one two three four", "fake:ttft=0.5,tps=10")
        assert _sse(site, "web-2", streamed["id"]) == "one two three four"
        slow = submit(site, "web-2", "slow", "fake:ttft=0.2,tps=2,tokens=100")
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(long_poll, site, "web-2", slow["id"], 30)
            time.sleep(1)
            url = f"{site.webs['web-1']}/v1/jobs/{slow['id']}/cancel"
            assert site.session().post(url, timeout=10).json()["status"] == "cancelled"
            status, took_s = waiting.result()
        assert status == 200 and took_s < 10  # woken by the cancel, not by its wait running out


def _sse(site: Site, web: str, job_id: str) -> str:
    """The text of a job as its Server-Sent Events on `web` tell it."""
    events = sse_events(site.session(), f"{site.webs[web]}/v1/jobs/{job_id}/events")
    assert events[-1]["type"] == "end", events
    return "".join(e["delta"] for e in events if e["type"] == "delta")


def test_a_redis_host_lost_from_the_cluster_ends_every_accepted_job() -> None:
    """redis-b (a primary and another primary's replica) SIGKILLed and cut under 10 submits a
    second: its replica on redis-c takes over; submits wait or answer 503 meanwhile, then 202
    again; every accepted job completes, without restarting any chatq process."""
    with running_site(store="cluster") as site:
        accepted: list[str] = []
        after_loss: list[str] = []
        slowest_s = 0.0
        refused = 0
        started = time.monotonic()
        lost_at = 0.0
        for i in range(120):
            time.sleep(max(0.0, started + i / 10 - time.monotonic()))
            if not lost_at and time.monotonic() - started > 3:
                site.lose("redis-b")
                lost_at = time.monotonic()
            t0 = time.monotonic()
            answer = site.session().post(
                f"{site.webs[WEBS[i % 2]]}/v1/jobs",
                json={
                    "model": "fake:ttft=0.2",
                    "messages": [{"role": "user", "content": f"f {i}"}],
                },
                timeout=30,
            )
            slowest_s = max(slowest_s, time.monotonic() - t0)
            if answer.status_code == 202:
                accepted.append(answer.json()["id"])
                after_loss += [answer.json()["id"]] if lost_at else []
            else:
                assert answer.status_code == 503, answer.text
                assert answer.json()["error"]["code"] == "backend_unavailable"
                assert answer.headers["Retry-After"]
                refused += 1
        records = wait_until(lambda: all_terminal(site, accepted), 60, "all accepted terminal")
    assert Counter(r["status"] for r in records) == {"completed": len(accepted)}
    assert refused < 60 and len(accepted) + refused == 120
    # Jobs of the lost primary's slots were accepted after the loss: its replica took over.
    assert any(_on_second_primary(job_id) for job_id in after_loss)
    print(
        f"\ncluster host lost: {len(accepted)} accepted, {refused} refused with 503, slowest "
        f"submit {slowest_s:.1f} s; all accepted completed, none lost"
    )


def _on_second_primary(job_id: str) -> bool:
    """Whether the job's slot is in the second primary's third of the slots (the one on
    redis-b; scripts/localcluster.py shares them out evenly, in order)."""
    share = SLOTS // 3
    return share <= key_slot(keys.job(job_id).encode()) < 2 * share
