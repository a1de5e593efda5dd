"""A property test of the job state machine (chatq/lua.py through chatq.store.Store).

Hypothesis drives a real Redis with any interleaving of what the concurrent actors do:
the web creating jobs (plain, cache hits, or followers of an identical job in flight) and
cancelling them, workers claiming (and re-claiming: redelivery), counting attempts,
appending text and finishing with a run id that may be stale, the monitor heartbeating,
and the sweeper requeueing a job whose lease was forced into the past. Every script is
atomic, so a sequence of calls is an interleaving of concurrent actors.

After every step the Redis state is compared with a small model of the rules, and the
promises hold: a terminal job never changes again, every job has its owner, output_text is
the concatenation of the deltas after the last reset, a job with an `end` event is terminal
with exactly one, followers end like their leader, and no job is stuck (each live job holds a
lease the sweeper watches, or follows a live job that does).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from chatq import jobs, keys
from chatq.store import Store

DB = 14  # a database of its own: the machine flushes it before every example
LEASE_S = 30.0
MAX_TAKEOVERS = 1
TERMINAL = jobs.TERMINAL
OWNERS = ("alice", "bob")
FLIGHTS = ("", "flight-a", "flight-b")
STALE_RUN = "0000000000000000"
texts = st.text(alphabet="ab xyé", min_size=0, max_size=6)


@dataclass
class Model:
    """What the rules say one job should look like."""

    owner: str
    status: str = jobs.QUEUED
    output: str = ""
    run: str = ""
    leader: str = ""
    followers: set[str] = field(default_factory=set)
    flight: str = ""
    has_message: bool = True  # a Celery message exists (and may be delivered again)
    takeovers: int = 0
    runs: list[str] = field(default_factory=list)


def _db_url(redis_url: str) -> str:
    return redis_url.rsplit("/", 1)[0] + f"/{DB}"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(_db_url(redis_url), decode_responses=True)
    c.flushdb()
    yield c
    c.flushdb()
    c.close()


def _deltas_after_last_reset(events: list[tuple[str, dict[str, str]]]) -> str:
    text: list[str] = []
    for _, data in events:
        if data["t"] == "reset":
            text = []
        elif data["t"] == "delta":
            text.append(data["v"])
    return "".join(text)


class JobMachine(RuleBasedStateMachine):
    """The web, workers, monitor and sweeper, acting on one Redis in any order."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__()
        client.flushdb()
        self.redis = client
        self.store = Store(client, job_ttl_s=3600)
        self.model: dict[str, Model] = {}
        self.inflight: dict[str, str] = {}
        # Terminal jobs as first seen terminal: (record fields, number of events).
        self.frozen: dict[str, tuple[dict[str, str], int]] = {}
        self.counter = 0

    # --- helpers ---------------------------------------------------------------------

    def _choose(self, data: st.DataObject, test: Callable[[Model], bool]) -> str | None:
        """One of the jobs that pass `test`, or None when there is none."""
        ids = sorted(j for j, m in self.model.items() if test(m))
        return data.draw(st.sampled_from(ids), label="job") if ids else None

    def _pick_run(self, data: st.DataObject, job_id: str) -> str:
        """Mostly the current run, else an earlier one or one that never held the job."""
        m = self.model[job_id]
        pick = data.draw(st.integers(0, 7), label="run")
        if m.run and pick < 4:
            return m.run
        runs = [*m.runs, STALE_RUN]
        return runs[pick % len(runs)]

    def _group(self, job_id: str) -> list[str]:
        return [job_id, *sorted(self.model[job_id].followers)]

    def _owned(self, job_id: str, run: str) -> bool:
        m = self.model[job_id]
        return m.status == jobs.IN_PROGRESS and m.run == run and run != ""

    def _close_group(self, job_id: str, status: str) -> None:
        leader = self.model[job_id]
        for j in self._group(job_id):
            self.model[j].status = status
            self.model[j].run = ""
        leader.followers = set()
        if leader.flight and self.inflight.get(leader.flight) == job_id:
            del self.inflight[leader.flight]

    def _assert_followers_match(self, leader_id: str, follower_ids: list[str]) -> None:
        """Followers end with their leader's status, output and result."""
        fields = ("status", "output_text", "result", "error")
        leader = self.redis.hmget(keys.job(leader_id), fields)
        for f in follower_ids:
            assert self.redis.hmget(keys.job(f), fields) == leader, (leader_id, f)

    # --- the web -----------------------------------------------------------------------

    @initialize()
    def first_job(self) -> None:
        self.create(OWNERS[0], "")

    @rule(owner=st.sampled_from(OWNERS), flight=st.sampled_from(FLIGHTS))
    def create(self, owner: str, flight: str) -> None:
        self.counter += 1
        job_id = f"job_{self.counter:04d}{'x' * 16}"
        record = jobs.new_record(job_id, owner, "fake", "interactive", {"n": self.counter},
                                 time.time())
        leader = self.inflight.get(flight, "") if flight else ""
        created = self.store.create(record, LEASE_S, flight=flight)
        m = Model(owner=owner)
        if leader and self.model[leader].status not in TERMINAL:
            assert (created.kind, created.value) == ("follower", leader)
            lm = self.model[leader]
            m.leader, m.has_message = leader, False
            m.status = jobs.IN_PROGRESS if lm.status == jobs.IN_PROGRESS else jobs.QUEUED
            m.output = lm.output
            lm.followers.add(job_id)
        else:
            assert created.kind == "created"
            if flight:
                self.inflight[flight] = job_id
                m.flight = flight
        self.model[job_id] = m

    @rule(owner=st.sampled_from(OWNERS), text=texts)
    def create_cache_hit(self, owner: str, text: str) -> None:
        """A cache hit: the job is written completed."""
        self.counter += 1
        job_id = f"job_{self.counter:04d}{'c' * 16}"
        now = time.time()
        record = jobs.new_record(job_id, owner, "fake", "interactive", {"n": self.counter}, now)
        record |= {"status": jobs.COMPLETED, "cached": "1", "output_text": text,
                   "result": json.dumps({"cached": text}), "finish_reason": "stop",
                   "started_at": repr(now), "completed_at": repr(now)}
        assert self.store.create(record, LEASE_S, done=True).kind == "created"
        self.model[job_id] = Model(owner=owner, status=jobs.COMPLETED, output=text,
                                   has_message=False)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """A client cancels any job, live or ended."""
        self._cancel(self._choose(data, lambda m: True))

    @rule(data=st.data())
    def cancel_a_leader(self, data: st.DataObject) -> None:
        """A client cancels a job that others follow: they must go on on their own."""
        self._cancel(self._choose(data, lambda m: bool(m.followers)))

    def _cancel(self, job_id: str | None) -> None:
        if job_id is None:
            return
        m = self.model[job_id]
        state, detached = self.store.cancel(job_id, LEASE_S)
        if m.status in TERMINAL:
            assert (state, detached) == (m.status, [])
            return
        assert state == jobs.CANCELLED
        assert sorted(detached) == sorted(m.followers)
        if m.leader:
            self.model[m.leader].followers.discard(job_id)
        for f in m.followers:
            fm = self.model[f]
            fm.leader, fm.status, fm.output, fm.has_message = "", jobs.QUEUED, "", True
        m.followers = set()
        if m.flight and self.inflight.get(m.flight) == job_id:
            del self.inflight[m.flight]
        m.status, m.run = jobs.CANCELLED, ""

    # --- a worker ----------------------------------------------------------------------

    @rule(data=st.data())
    def claim(self, data: st.DataObject) -> None:
        """A worker receives the message of a queued job."""
        self._deliver(self._choose(data, lambda m: m.status == jobs.QUEUED and m.has_message))

    @rule(data=st.data())
    def redeliver(self, data: st.DataObject) -> None:
        """The broker delivers a message again, whatever became of its job since."""
        self._deliver(self._choose(data, lambda m: m.has_message))

    def _deliver(self, job_id: str | None) -> None:
        if job_id is None:
            return  # only jobs whose message was sent can be delivered
        m = self.model[job_id]
        run = f"{len(m.runs) + 1:016x}"
        answer = self.store.claim(job_id, run, LEASE_S)
        if m.status != jobs.QUEUED:
            assert answer == m.status
            return
        assert answer == "claimed"
        m.run = run
        m.runs.append(run)
        for j in self._group(job_id):
            self.model[j].output = ""
            self.model[j].status = jobs.IN_PROGRESS

    def _running(self, data: st.DataObject) -> tuple[str, str] | None:
        job_id = self._choose(data, lambda m: bool(m.run))
        return None if job_id is None else (job_id, self._pick_run(data, job_id))

    @rule(data=st.data(), text=texts, call=st.sampled_from(["attempt", "append", "finish"]))
    def stale_run_writes(self, data: st.DataObject, text: str, call: str) -> None:
        """A run that lost its job (taken over, cancelled, ended) still tries to write."""
        job_id = self._choose(data, lambda m: True)
        if job_id is None:
            return
        m = self.model[job_id]
        run = data.draw(st.sampled_from([r for r in [*m.runs, STALE_RUN] if r != m.run]))
        if call == "attempt":
            assert not self.store.begin_attempt(job_id, run)
        elif call == "append":
            assert not self.store.append(job_id, run, text)
        else:
            assert not self.store.finish(job_id, run, jobs.COMPLETED, {"result": "{}"}, text)

    @rule(data=st.data())
    def begin_attempt(self, data: st.DataObject) -> None:
        if (picked := self._running(data)) is None:
            return
        job_id, run = picked
        ours = self._owned(job_id, run)
        assert self.store.begin_attempt(job_id, run) is ours
        if ours:
            for j in self._group(job_id):
                self.model[j].output = ""

    @rule(data=st.data(), text=texts)
    def append(self, data: st.DataObject, text: str) -> None:
        if (picked := self._running(data)) is None:
            return
        job_id, run = picked
        ours = self._owned(job_id, run)
        assert self.store.append(job_id, run, text) is ours
        if ours:
            for j in self._group(job_id):
                self.model[j].output += text

    @rule(data=st.data(), text=texts, status=st.sampled_from([jobs.COMPLETED, jobs.FAILED]))
    def finish(self, data: st.DataObject, text: str, status: str) -> None:
        if (picked := self._running(data)) is None:
            return
        job_id, run = picked
        ours = self._owned(job_id, run)
        fields = ({"result": json.dumps({"run": run}), "finish_reason": "stop"}
                  if status == jobs.COMPLETED else {"error": json.dumps({"code": "x"})})
        assert self.store.finish(job_id, run, status, fields, text, "stop") is ours
        if not ours:
            return
        followers = sorted(self.model[job_id].followers)
        for j in self._group(job_id):
            self.model[j].output += text
        self._close_group(job_id, status)
        self._assert_followers_match(job_id, followers)

    # --- the monitor -------------------------------------------------------------------

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        if (picked := self._running(data)) is None:
            return
        job_id, run = picked
        expected = ("in_progress" if self._owned(job_id, run)
                    else "cancelled" if self.model[job_id].status == jobs.CANCELLED else "lost")
        assert self.store.heartbeat([(job_id, run)], LEASE_S) == [expected]

    @rule(data=st.data())
    def sweep_after_lease_expired(self, data: st.DataObject) -> None:
        """The holder stopped renewing: force the lease into the past, run the sweeper's step."""
        job_id = self._choose(data, lambda m: m.status not in TERMINAL and not m.leader)
        if job_id is None:
            return
        m = self.model[job_id]
        self.redis.zadd(keys.leases(), {job_id: time.time() - 1}, xx=True)
        outcome = self.store.requeue_if_expired(job_id, LEASE_S, MAX_TAKEOVERS)
        if m.leader:  # followers hold no lease: the sweeper never sees them
            assert outcome == "fresh"
        elif m.status in TERMINAL:
            assert outcome in ("fresh", "gone")
        elif m.status == jobs.QUEUED:
            assert outcome == "resend"
            m.has_message = True
        else:
            m.takeovers += 1
            if m.takeovers > MAX_TAKEOVERS:
                assert outcome == "failed"
                followers = sorted(m.followers)
                self._close_group(job_id, jobs.FAILED)
                self._assert_followers_match(job_id, followers)
            else:
                assert outcome == "requeued"
                m.run, m.has_message = "", True
                for j in self._group(job_id):
                    self.model[j].status = jobs.QUEUED

    # --- invariants --------------------------------------------------------------------

    def _read_all(self) -> list[tuple[str, dict[str, str], list[tuple[str, dict[str, str]]],
                                     float | None]]:
        pipe = self.redis.pipeline(transaction=False)
        ids = sorted(self.model)
        for job_id in ids:
            pipe.hgetall(keys.job(job_id))
            pipe.xrange(keys.events(job_id))
            pipe.zscore(keys.leases(), job_id)
        out = pipe.execute()
        return [(job_id, out[3 * i], out[3 * i + 1], out[3 * i + 2])
                for i, job_id in enumerate(ids)]

    @invariant()
    def redis_agrees_with_the_rules(self) -> None:
        for job_id, record, events, lease in self._read_all():
            m = self.model[job_id]
            assert record, f"{job_id} disappeared"
            # Every job has its owner, and the status and text the rules say.
            assert record.get("owner") == m.owner, (job_id, record)
            assert record["status"] == m.status, (job_id, record["status"], m)
            assert record["output_text"] == m.output, (job_id, record, m)
            # output_text is what a client rebuilds from the events.
            assert _deltas_after_last_reset(events) == record["output_text"], (job_id, events)
            ends = [data for _, data in events if data["t"] == "end"]
            if record["status"] in TERMINAL:
                assert len(ends) == 1 and ends[0]["v"] == record["status"], (job_id, events)
                assert events[-1][1]["t"] == "end", (job_id, events)
                assert lease is None, f"terminal {job_id} still holds a lease"
                self._check_frozen(job_id, record, len(events))
            else:
                assert ends == [], (job_id, events)
                self._check_not_stuck(job_id, record, lease)

    def _check_frozen(self, job_id: str, record: dict[str, str], n_events: int) -> None:
        """A terminal job never changes again."""
        seen = self.frozen.setdefault(job_id, (record, n_events))
        assert seen == (record, n_events), (job_id, seen, record, n_events)

    def _check_not_stuck(self, job_id: str, record: dict[str, str], lease: float | None) -> None:
        """A live job holds a lease, or follows a live leader that does."""
        if self.model[job_id].leader:
            leader = self.model[job_id].leader
            assert lease is None
            assert self.model[leader].status not in TERMINAL
            assert self.redis.zscore(keys.leases(), leader) is not None, (job_id, leader)
            assert job_id in self.redis.smembers(keys.followers(leader))
        else:
            assert lease is not None, f"{job_id} ({record['status']}) has no lease: stuck"

    @invariant()
    def inflight_points_at_live_leaders(self) -> None:
        for flight in FLIGHTS[1:]:
            holder = self.redis.get(keys.inflight(flight))
            assert holder == self.inflight.get(flight), (flight, holder)
            if holder is not None:
                assert self.model[holder].status not in TERMINAL


def _run(client: redis.Redis, examples: int, steps: int) -> None:
    run_state_machine_as_test(
        lambda: JobMachine(client),
        settings=settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                          database=None, suppress_health_check=[HealthCheck.too_slow]),
    )


def test_no_interleaving_of_actors_breaks_the_job_state_machine(client: redis.Redis) -> None:
    _run(client, examples=150, steps=40)


@pytest.mark.slow
def test_no_interleaving_of_actors_breaks_the_job_state_machine_long(
    client: redis.Redis,
) -> None:
    _run(client, examples=1000, steps=60)


def test_a_terminal_job_ignores_every_later_transition(client: redis.Redis) -> None:
    """The promise spelled out once, in plain steps: nothing moves a completed job."""
    store = Store(client, job_ttl_s=3600)
    record = jobs.new_record("job_" + "t" * 32, "alice", "fake", "interactive", {}, time.time())
    store.create(record, LEASE_S)
    assert store.claim(record["id"], "r1", LEASE_S) == "claimed"
    assert store.append(record["id"], "r1", "hello")
    assert store.finish(record["id"], "r1", jobs.COMPLETED, {"result": "{}"}, " world", "stop")
    before = (client.hgetall(keys.job(record["id"])), client.xlen(keys.events(record["id"])))
    assert store.claim(record["id"], "r2", LEASE_S) == jobs.COMPLETED
    assert not store.begin_attempt(record["id"], "r1")
    assert not store.append(record["id"], "r1", "late")
    assert not store.finish(record["id"], "r1", jobs.FAILED, {"error": "{}"})
    assert store.cancel(record["id"], LEASE_S) == (jobs.COMPLETED, [])
    client.zadd(keys.leases(), {record["id"]: 0})
    assert store.requeue_if_expired(record["id"], LEASE_S, MAX_TAKEOVERS) == "gone"
    assert store.heartbeat([(record["id"], "r1")], LEASE_S) == ["lost"]
    after = (client.hgetall(keys.job(record["id"])), client.xlen(keys.events(record["id"])))
    assert after == before
    assert before[0]["output_text"] == "hello world"


def test_a_follower_joining_a_running_job_starts_now_not_in_the_future(
    client: redis.Redis,
) -> None:
    store = Store(client, job_ttl_s=3600)
    lease_s = 600.0
    now = time.time()
    leader = jobs.new_record("job_" + "l" * 32, "alice", "fake", "interactive", {}, now)
    follower = jobs.new_record("job_" + "f" * 32, "alice", "fake", "interactive", {}, now)
    assert store.create(leader, lease_s, flight="same").kind == "created"
    assert store.claim(leader["id"], "r1", lease_s) == "claimed"
    assert store.create(follower, lease_s, flight="same").kind == "follower"
    started = float(client.hget(keys.job(follower["id"]), "started_at") or 0)
    assert store.finish(leader["id"], "r1", jobs.COMPLETED, {"result": "{}"})
    completed = float(client.hget(keys.job(follower["id"]), "completed_at") or 0)
    assert now <= started <= completed <= time.time() + 1, (now, started, completed)
