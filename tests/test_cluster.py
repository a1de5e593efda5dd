"""The job store on a Redis Cluster (CHATQ_STATE_URL), the broker on a Redis of its own.

Three primaries, so that jobs, their shards' indexes and notifications (sharded pub/sub) are
spread over nodes: the pipeline end to end, streamed text, cancel, single-flight, a killed
worker, batches (the outbox and the `{g}` slot) and /v1/queue.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from redis.cluster import RedisCluster

from chatq import keys
from scripts.localredis import LocalRedis
from tests.batchkit import content, request_line, run_batch, wait_ended
from tests.conftest import Stack, start_stack
from tests.procs import longpoll_waiters, sse_events, start_fakellm, start_worker, wait_until

pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def on_cluster(redis_cluster: str) -> Iterator[tuple[Stack, str]]:
    """Two workers and a web, the state on the cluster; yields (stack, fakellm base URL)."""
    broker = LocalRedis().start()
    fake, fake_url = start_fakellm()
    stack = start_stack(
        broker.url, fake_url, workers=2, CHATQ_STATE_URL=redis_cluster, CHATQ_LEASE="2"
    )
    yield stack, fake_url.removesuffix("/v1")
    stack.stop()
    fake.stop()
    broker.stop()


def _calls(fakellm: str) -> int:
    return int(requests.get(f"{fakellm}/stats", timeout=5).json()["requests"])


def _state(stack: Stack) -> Any:
    return RedisCluster.from_url(stack.env["CHATQ_STATE_URL"], decode_responses=True)


def _workers_running(stack: Stack) -> int:
    """Workers whose last heartbeat counted running jobs (their entries: "slots running t")."""
    entries = _state(stack).hgetall(keys.workers()).values()
    return sum(1 for entry in entries if int(entry.split()[1]) > 0)


def test_jobs_run_with_their_keys_spread_over_the_nodes(on_cluster: tuple[Stack, str]) -> None:
    stack, _ = on_cluster
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(lambda i: stack.submit(f"spread {i}", wait=20).json(), range(40)))
    assert [j["status"] for j in done] == ["completed"] * 40
    assert [j["output_text"] for j in done] == [f"spread {i}" for i in range(40)]
    cluster = _state(stack)
    nodes = {cluster.get_node_from_key(keys.job(j["id"])).name for j in done}
    assert len(nodes) == 3, nodes  # 40 jobs in 64 shards land on every primary
    got = stack.get(done[0]["id"], suffix="/result", wait=5)
    assert got.json()["choices"][0]["message"]["content"] == "spread 0"


def test_streamed_text_reaches_a_long_poll_and_sse(on_cluster: tuple[Stack, str]) -> None:
    stack, _ = on_cluster
    job_id = stack.submit("one two three four five six", model="fake:ttft=0.2,tps=10").json()["id"]
    cursor, deltas, done = "0", [], False
    while not done:
        page = stack.get(job_id, suffix="/events", cursor=cursor, wait=10).json()
        deltas += [e["delta"] for e in page["events"] if e["type"] == "delta"]
        cursor, done = page["cursor"], page["done"]
    assert "".join(deltas) == "one two three four five six"
    events = sse_events(stack.session(), f"{stack.url}/v1/jobs/{job_id}/events")
    assert events[-1] == {"type": "end", "status": "completed", "finish_reason": "stop"}


def test_a_cancel_stops_a_running_job_and_wakes_its_waiters(
    on_cluster: tuple[Stack, str],
) -> None:
    stack, _ = on_cluster
    job_id = stack.submit("slow", model="fake:ttft=0.2,tps=2,tokens=100").json()["id"]
    with ThreadPoolExecutor(2) as pool:
        waiting = pool.submit(stack.get, job_id, wait=30)
        wait_until(
            lambda: stack.get(job_id).json()["output_text"] and longpoll_waiters(stack.url) >= 1,
            10,
            "the job streaming and its waiter parked",
        )
        stack.session().post(f"{stack.url}/v1/jobs/{job_id}/cancel", timeout=10)
        assert waiting.result().json()["status"] == "cancelled"


def test_identical_requests_share_one_upstream_call(on_cluster: tuple[Stack, str]) -> None:
    stack, fakellm = on_cluster
    before = _calls(fakellm)
    body = {
        "model": "fake:ttft=1",
        "temperature": 0,
        "messages": [{"role": "user", "content": f"shared on a cluster {time.time()}"}],
    }
    session = stack.session()
    with ThreadPoolExecutor(6) as pool:
        posted = list(
            pool.map(
                lambda _: session.post(f"{stack.url}/v1/jobs?wait=20", json=body, timeout=30),
                range(6),
            )
        )
    assert {p.json()["status"] for p in posted} == {"completed"}
    assert _calls(fakellm) - before == 1


def test_a_killed_workers_jobs_finish_on_the_other(on_cluster: tuple[Stack, str]) -> None:
    stack, _ = on_cluster
    ids = [
        stack.submit(f"survive {i}", model="fake:ttft=0.3,tps=10,tokens=20").json()["id"]
        for i in range(20)
    ]
    wait_until(lambda: _workers_running(stack) >= 2, 10, "both workers running some of them")
    victim = next(p for p in stack.procs if p.name == "worker" and p.alive())
    victim.kill()
    stack.procs.append(start_worker(stack.env, ""))  # the module's stack keeps two workers
    jobs = [stack.get(job_id, wait=40).json() for job_id in ids]
    assert [j["status"] for j in jobs] == ["completed"] * 20
    assert all(len(j["output_text"].split()) == 20 for j in jobs)
    assert any(j["attempts"] == 2 for j in jobs)  # taken over from the killed worker


def test_a_batch_runs_through_the_outbox_on_a_cluster(on_cluster: tuple[Stack, str]) -> None:
    stack, _ = on_cluster
    lines = [request_line(f"c{i}", f"Question {i}") for i in range(3)]
    batch = wait_ended(stack.url, run_batch(stack.url, lines)["id"])
    assert batch["status"] == "completed", batch
    assert batch["request_counts"] == {"total": 3, "completed": 3, "failed": 0}
    assert sorted(line.custom_id for line in content(stack.url, batch["output_file_id"])) == [
        "c0",
        "c1",
        "c2",
    ]


def test_the_queue_figures_read_every_shard(on_cluster: tuple[Stack, str]) -> None:
    stack, _ = on_cluster
    ids = [stack.submit(f"counted {i}").json()["id"] for i in range(16)]
    assert len({keys.shard(i) for i in ids}) > 1  # jobs in several shards
    queue = stack.session().get(f"{stack.url}/v1/queue", timeout=10).json()
    assert queue["workers"]["count"] >= 2, queue
    # The rate spans this minute and the last (60 to 120 s): all 16 count, whatever ran
    # before, once the web has sent its counts (once a second).
    wait_until(
        lambda: (
            stack.session().get(f"{stack.url}/v1/queue", timeout=10).json()["arrival_rate_per_s"]
            >= 16 / 120
        ),
        5,
        "the arrivals counted",
    )


@pytest.mark.slow
def test_a_primary_failover_in_the_cluster_ends_every_accepted_job() -> None:
    """A primary SIGKILLed under load: its replica takes over, submits answer 503 meanwhile,
    then 2xx again; every job accepted before, during and after ends terminal."""
    from scripts.localcluster import LocalCluster, sharded_pubsub_supported

    if not sharded_pubsub_supported():
        pytest.skip("the redis-server here has no sharded pub/sub (Redis 7 needed)")
    cluster = LocalCluster(primaries=3, replicas=1).start()
    broker = LocalRedis().start()
    fake, fake_url = start_fakellm()
    stack = start_stack(broker.url, fake_url, workers=1, CHATQ_STATE_URL=cluster.url)
    try:
        accepted, refused = _load_through_a_failover(stack, cluster.primaries[1])
        ends = [stack.get(job_id, wait=40).json().get("status") for job_id in accepted]
        lost = [s for s in ends if s is None]
        print(
            f"cluster failover: {len(accepted)} accepted, {refused} refused with 503, "
            f"{len(lost)} lost"
        )
        assert refused < len(accepted) and lost == []
        assert set(ends) <= {"completed"}, ends
    finally:
        stack.stop()
        fake.stop()
        broker.stop()
        cluster.stop()


def _load_through_a_failover(stack: Stack, victim: LocalRedis) -> tuple[list[str], int]:
    """10 submits a second for 12 s, the victim SIGKILLed after 3 s: (accepted ids, 503s)."""
    accepted: list[str] = []
    refused = 0
    started = time.monotonic()
    killed = False
    for i in range(120):
        time.sleep(max(0.0, started + i / 10 - time.monotonic()))
        if not killed and time.monotonic() - started > 3:
            victim.stop(kill=True)
            killed = True
        answer = stack.submit(f"failover {i}", model="fake:ttft=0.2")
        if answer.status_code == 202:
            accepted.append(answer.json()["id"])
        else:
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == "backend_unavailable"
            refused += 1
    return accepted, refused
