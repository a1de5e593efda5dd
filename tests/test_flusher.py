"""The worker's flusher (worker/jobs/flusher.py), in-process on a real Redis: each flush writes the
text of the jobs that have some, and passes over the others without waiting on them."""

from __future__ import annotations

import threading
import time

import redis

from chatq import keys
from chatq.jobs import record as jobs
from chatq.jobs.store import Store
from scripts.localredis import LocalRedis
from worker.jobs.flusher import Flusher
from worker.jobs.running import Handle


def _running(store: Store, run_id: str) -> Handle:
    """A job created and claimed by the run `run_id`, and its handle."""
    job_id = jobs.new_job_id()
    record = jobs.new_record(job_id, "alice", "fake", "interactive", {}, time.time())
    store.create(record=record, lease_s=10)
    assert store.claim(job_id=job_id, run_id=run_id, lease_s=10).claimed
    return Handle(job_id, run_id, time.monotonic() + 60)


def test_a_flush_writes_the_text_there_is_and_does_not_wait_on_writers_with_none() -> None:
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    flusher = Flusher(Store(client, 3600), interval_s=3600)  # flushed by hand here
    try:
        talking = flusher.writer(_running(flusher.store, "r1"), 10_000)
        silent = flusher.writer(_running(flusher.store, "r2"), 10_000)
        assert talking.add("Hello")
        flushed = threading.Event()
        with silent.lock:  # held, as while its job ends; it has no text to flush
            threading.Thread(target=lambda: (flusher.flush_all(), flushed.set())).start()
            assert flushed.wait(5), "the flush waited on a writer with no text"
        assert client.get(keys.text(talking.handle.job_id)) == "Hello"
        assert client.get(keys.text(silent.handle.job_id)) is None
        assert silent.add(", world") and talking.add("!")
        flusher.flush_all()
        assert client.get(keys.text(talking.handle.job_id)) == "Hello!"
        assert client.get(keys.text(silent.handle.job_id)) == ", world"
    finally:
        flusher.stop()
        server.stop()
