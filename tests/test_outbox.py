"""The outbox: every end of an announced job is handed to a reader at least once, even when
the reader that took it dies before acknowledging it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from chatq import keys
from chatq.jobs import record as jobs
from chatq.jobs.outbox import Outbox
from chatq.jobs.store import Store
from scripts.localredis import LocalRedis
from tests.procs import outbox_length

LEASE_S = 30.0
CLAIM_IDLE_S = 1.0


@pytest.fixture(params=["single", "cluster"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """A store on a Redis of its own, or on the session's Redis Cluster (emptied)."""
    if request.param == "cluster":
        client: redis.Redis = RedisCluster.from_url(  # type: ignore[assignment]
            request.getfixturevalue("redis_cluster"), decode_responses=True
        )
        client.flushdb()
        yield Store(client, job_ttl_s=3600)
        client.flushdb()
        client.close()
        return
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    yield Store(client, job_ttl_s=3600)
    client.close()
    server.stop()


def _job(store: Store, name: str, announce: bool, lane: str = "interactive") -> str:
    job_id = f"job_{name:x<32}"
    record = jobs.new_record(job_id, "alice", "fake", lane, {}, time.time())
    if announce:
        record["announce"] = "1"
    store.create(record=record, lease_s=LEASE_S)
    return job_id


def test_each_way_an_announced_job_ends_is_in_the_outbox(store: Store) -> None:
    done, failed, cancelled, quiet = (
        _job(store, n, n != "quiet") for n in ("done", "failed", "cancelled", "quiet")
    )
    for job_id in (done, failed, quiet):
        assert store.claim(job_id=job_id, run_id="r", lease_s=LEASE_S).claimed
    store.finish(job_id=done, run_id="r", status=jobs.COMPLETED, fields={"result": "{}"})
    store.finish(job_id=quiet, run_id="r", status=jobs.COMPLETED, fields={"result": "{}"})
    store.cancel(job_id=cancelled, lease_s=LEASE_S)
    # Its worker is lost for good: its lease ran out, and was noted a lease ago.
    store.redis.zadd(keys.leases_of(failed, store.cluster), {failed: 0})
    store.redis.hset(keys.job(failed), "suspect", "0")
    store.sweep(lease_s=LEASE_S, resend_s=LEASE_S, max_takeovers=0)
    entries = Outbox(store.redis, "reader").read(block_s=0.1)
    assert {(e.job_id, e.status) for e in entries} == {
        (done, jobs.COMPLETED),
        (failed, jobs.FAILED),
        (cancelled, jobs.CANCELLED),
    }


def test_a_job_s_end_goes_to_the_readers_of_its_lane_only(store: Store) -> None:
    line, chat = _job(store, "line", True, "batch"), _job(store, "chat", True)
    for job_id in (line, chat):
        store.claim(job_id=job_id, run_id="r", lease_s=LEASE_S)
        store.finish(job_id=job_id, run_id="r", status=jobs.COMPLETED, fields={"result": "{}"})
    interactive = Outbox(store.redis, "interactive-worker", lanes=("interactive",))
    batch = Outbox(store.redis, "batch-worker", lanes=("batch",))
    assert [e.job_id for e in interactive.read(block_s=0.1)] == [chat]
    taken = batch.read(block_s=0.1)
    assert [e.job_id for e in taken] == [line]
    batch.ack(taken)
    assert interactive.read(block_s=0.1) == batch.read(block_s=0.1) == []
    assert outbox_length(store.redis) == 1  # the interactive one, read but not acknowledged


def test_an_entry_a_reader_took_and_never_acknowledged_goes_to_another(store: Store) -> None:
    job_id = _job(store, "taken", True)
    store.claim(job_id=job_id, run_id="r", lease_s=LEASE_S)
    store.finish(job_id=job_id, run_id="r", status=jobs.COMPLETED, fields={"result": "{}"})
    # Long enough that the survivor's first look comes before it on a loaded machine.
    dying = Outbox(store.redis, "dies-before-ack", claim_idle_s=CLAIM_IDLE_S)
    assert [e.job_id for e in dying.read(block_s=0.1)] == [job_id]
    survivor = Outbox(store.redis, "survivor", claim_idle_s=CLAIM_IDLE_S)
    assert survivor.read(block_s=0.1) == []  # not yet: its reader may still be at it
    time.sleep(CLAIM_IDLE_S + 0.1)
    taken_over = survivor.read(block_s=0.1)
    assert [e.job_id for e in taken_over] == [job_id]
    survivor.ack(taken_over)
    time.sleep(CLAIM_IDLE_S + 0.1)
    assert survivor.read(block_s=0.1) == [] and outbox_length(store.redis) == 0


def test_an_idle_reader_looks_for_a_silent_reader_s_entries_once_per_quarter_idle_time() -> None:
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        reader = Outbox(client, "idle", claim_idle_s=60.0)
        for _ in range(5):
            assert reader.read(block_s=0.05) == []
        stats = client.info("commandstats").get("cmdstat_xautoclaim", {})
        # One look (a command per stream: a shard's of each lane), not one per read: 128
        # commands, not 640.
        assert stats.get("calls") == len(keys.SHARDS) * len(jobs.PRIORITIES)
    finally:
        client.close()
        server.stop()


def test_a_reader_makes_its_group_again_after_redis_lost_its_data(store: Store) -> None:
    reader = Outbox(store.redis, "reader")
    assert reader.read(block_s=0.05) == []
    store.redis.flushdb()  # a restart without persistence
    assert reader.read(block_s=0.05) == []
    job_id = _job(store, "after-loss", True)
    assert store.claim(job_id=job_id, run_id="r", lease_s=LEASE_S).claimed
    store.finish(job_id=job_id, run_id="r", status=jobs.COMPLETED, fields={"result": "{}"})
    entries = reader.read(block_s=0.1)
    assert [(e.job_id, e.status) for e in entries] == [(job_id, jobs.COMPLETED)]
    reader.ack(entries)
    assert outbox_length(store.redis) == 0
