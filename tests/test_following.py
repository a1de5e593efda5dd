"""A flush's notification carries each new delta with its entry id and the id before it, so
that a woken follower (the events long-poll, SSE) answers without reading the stream: the
notice on a real Redis, the listener's waiters, and the app in process following a job whose
text the test appends as a worker's flusher would."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask import Flask

from chatq import keys
from chatq.config.settings import Settings
from chatq.jobs import record as jobs
from chatq.jobs.events import Carried, Event, continuing, decode_carried
from chatq.jobs.notify import Listener
from chatq.jobs.results import Piece
from chatq.jobs.store import Store
from chatq.jobs.waiters import MAX_CARRIED, Waiter, Waiters
from scripts.localredis import LocalRedis
from tests.inproc import in_process
from tests.procs import wait_until

KEY = "sk-inprocess-following-5d1e"
AUTH = {"Authorization": f"Bearer {KEY}"}
DELTAS = 20


@pytest.fixture
def server() -> Iterator[LocalRedis]:
    server = LocalRedis().start()
    try:
        yield server
    finally:
        server.stop()


def _client(server: LocalRedis) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


def _claimed(store: Store, run_id: str = "r1") -> str:
    job_id = jobs.new_job_id()
    record = jobs.new_record(job_id, "alice", "fake", "interactive", {}, time.time())
    store.create(record=record, lease_s=60)
    assert store.claim(job_id=job_id, run_id=run_id, lease_s=60).claimed
    return job_id


def _entry_ids(client: redis.Redis, job_id: str) -> list[str]:
    return [entry_id for entry_id, _ in client.xrange(keys.events(job_id))]


def _xranges(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_xrange", {}).get("calls", 0))


CHAIN = [Carried("0", "1-0", "a"), Carried("1-0", "2-0", "b"), Carried("2-0", "3-0", "c")]


@pytest.mark.parametrize(
    ("carried", "cursor", "expected"),
    [
        (CHAIN, "0", ["1-0", "2-0", "3-0"]),
        (CHAIN, "1-0", ["2-0", "3-0"]),  # the first was read already
        (CHAIN, "3-0", []),  # all of it read already: nothing new
        (CHAIN[:1] + CHAIN[2:], "0", None),  # a delta missing: read the stream
        (CHAIN, "7-0", None),  # the cursor is none of theirs
        ([], "0", None),
    ],
)
def test_carried_deltas_answer_only_when_they_continue_the_cursor(
    carried: list[Carried], cursor: str, expected: list[str] | None
) -> None:
    events = continuing(carried, cursor)
    assert (None if events is None else [e.id for e in events]) == expected
    if events:
        assert events[0] == Event(events[0].id, "delta", "abc"[-len(events)], "")


def test_unreadable_carried_deltas_wake_their_waiters_to_read() -> None:
    assert decode_carried('[["job_x", "0", "1-0"]]') == {}
    assert decode_carried("") == {}


def test_a_waiter_not_taking_its_deltas_keeps_so_many_then_reads_the_stream() -> None:
    waiter = Waiter(Waiters(), "job_" + "x" * 32, terminal_only=False)
    deltas = [Carried(f"{k}-0", f"{k + 1}-0", "x") for k in range(MAX_CARRIED + 2)]
    for delta in deltas[:MAX_CARRIED]:
        waiter.carry(delta)
    assert waiter.carried == deltas[:MAX_CARRIED]
    waiter.carry(deltas[MAX_CARRIED])
    assert waiter.carried is None
    waiter.carry(deltas[MAX_CARRIED + 1])  # kept, though it continues no cursor kept
    assert waiter.carried == deltas[MAX_CARRIED + 1 :]
    assert continuing(waiter.carried, deltas[0].id) is None
    waiter.carry(None)
    assert waiter.carried is None


def test_a_flush_notice_carries_each_new_delta_and_the_entry_before_it(
    server: LocalRedis,
) -> None:
    client = _client(server)
    store = Store(client, job_ttl_s=3600)
    first, second = _claimed(store), _claimed(store)
    pubsub = client.pubsub()
    pubsub.subscribe(*{keys.notify(keys.shard(j)) for j in (first, second)})
    assert store.append_many([Piece(first, "r1", 0, "Hé /\n"), Piece(second, "r1", 0, "x")])
    # The first piece again (its answer lost): appended once, announced but not carried.
    assert store.append_many([Piece(first, "r1", 0, "Hé /\n")]) == [True]
    notices = []
    while len(notices) < 3 and (message := pubsub.get_message(timeout=5)) is not None:
        if message["type"] == "message":
            notices.append(message["data"])
    pubsub.close()
    carried: dict[str, Carried] = {}
    for notice in notices:
        ids, _, raw = notice.partition("\n")
        assert ids.split()[0] == "+"
        carried |= decode_carried(raw)
    assert sorted(carried) == sorted([first, second])
    for job_id, text in ((first, "Hé /\n"), (second, "x")):
        before, entry = _entry_ids(client, job_id)[-2:]
        assert carried[job_id] == Carried(before, entry, text)
    assert notices[-1] == f"+ {first}"


def test_a_waiter_keeps_carried_deltas_until_a_notice_without_one(server: LocalRedis) -> None:
    client = _client(server)
    store = Store(client, job_ttl_s=3600)
    job_id = _claimed(store)
    listener = Listener(client)
    try:
        with (
            listener.waiting(job_id, terminal_only=False) as follower,
            listener.waiting(job_id, terminal_only=True) as status_waiter,
        ):
            wait_until(listener.connected.is_set, 10, "listener subscribed")
            # Its notice comes after the subscription's (which wake everyone).
            store.append_many([Piece(job_id, "r1", 0, "a")])
            wait_until(lambda: follower.carried, 10, "a delta carried")
            status_waiter.event.clear()
            store.append_many([Piece(job_id, "r1", 1, "b")])
            wait_until(lambda: len(follower.carried or []) == 2, 10, "two deltas carried")
            assert continuing(follower.carried or [], _entry_ids(client, job_id)[-3]) == [
                Event(entry, "delta", text, "")
                for entry, text in zip(_entry_ids(client, job_id)[-2:], "ab", strict=True)
            ]
            assert status_waiter.carried is None and not status_waiter.event.is_set()
            client.publish(keys.notify(keys.shard(job_id)), f"{job_id} {jobs.IN_PROGRESS}")
            wait_until(lambda: follower.carried is None, 10, "carried deltas dropped")
    finally:
        listener.stop()


@pytest.fixture
def app(server: LocalRedis) -> Iterator[Flask]:
    settings = Settings(redis_url=server.url, api_keys=(("alice", KEY),), default_model="fake")
    with in_process(settings) as app:
        listener = app.extensions["chatq"].listener
        listener.start()  # subscribed before the test follows: its first wake is no read
        wait_until(listener.connected.is_set, 10, "listener subscribed")
        yield app


def _feed(app: Flask, store: Store, job_id: str, seen: list[Any]) -> threading.Thread:
    """Append DELTAS pieces, each once the follower has seen the one before and waits again
    (so that it is parked when each comes), then end the job."""
    listener = app.extensions["chatq"].listener

    def run() -> None:
        offset = 0
        for k in range(DELTAS):
            wait_until(lambda k=k: len(seen) >= k, 10, f"delta {k} seen")
            wait_until(lambda: listener.connected.is_set() and listener.waiter_count, 10, "parked")
            store.append_many([Piece(job_id, "r1", offset, f"w{k} ")])
            offset += len(f"w{k} ")
        wait_until(lambda: len(seen) >= DELTAS, 10, "every delta seen")
        store.finish(job_id=job_id, run_id="r1", status=jobs.COMPLETED, fields={})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _deltas_of(client: redis.Redis, job_id: str) -> list[tuple[str, str]]:
    return [(i, e["v"]) for i, e in client.xrange(keys.events(job_id)) if e["t"] == "delta"]


def test_sse_takes_streamed_text_from_the_notices(app: Flask, server: LocalRedis) -> None:
    client = _client(server)
    store = Store(client, job_ttl_s=3600)
    job_id = _claimed(store)
    xranges = _xranges(client)
    deltas: list[tuple[str, str]] = []
    feeder = _feed(app, store, job_id, deltas)
    response = app.test_client().get(
        f"/v1/jobs/{job_id}/events",
        headers={**AUTH, "Accept": "text/event-stream"},
        buffered=False,
    )
    last = {}
    for chunk in response.response:
        text = chunk.decode() if isinstance(chunk, bytes) else chunk
        fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        last = json.loads(fields.get("data", "{}"))
        if last.get("type") == "delta":
            deltas.append((fields["id"], last["delta"]))
    response.close()
    feeder.join(10)
    assert deltas == _deltas_of(client, job_id) and len(deltas) == DELTAS
    assert last["type"] == "end"
    # One read to start and one at the end (its notice carries no delta): none per delta.
    assert _xranges(client) - xranges <= 3


def test_a_long_poll_woken_by_a_delta_answers_it_without_reading_again(
    app: Flask, server: LocalRedis
) -> None:
    client = _client(server)
    store = Store(client, job_ttl_s=3600)
    job_id = _claimed(store)
    http = app.test_client()
    cursor = http.get(f"/v1/jobs/{job_id}/events", headers=AUTH).get_json()["cursor"]
    xranges = _xranges(client)
    deltas: list[tuple[str, str]] = []
    feeder = _feed(app, store, job_id, deltas)
    pages = 0
    while len(deltas) < DELTAS:
        page = http.get(
            f"/v1/jobs/{job_id}/events", query_string={"cursor": cursor, "wait": 10}, headers=AUTH
        ).get_json()
        pages += 1
        deltas += [(page["cursor"], e["delta"]) for e in page["events"]]
        assert page["status"] == jobs.IN_PROGRESS and not page["done"]
        cursor = page["cursor"]
    feeder.join(10)
    assert deltas == _deltas_of(client, job_id) and pages == DELTAS
    # The one read each request makes before it parks.
    assert _xranges(client) - xranges <= pages + 1
