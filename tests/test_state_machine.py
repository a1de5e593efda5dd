"""A property test of the job state machine (chatq/*/*.lua through chatq.jobs.store.Store).

Hypothesis drives a real Redis with any interleaving of what the concurrent actors do:
the web creating jobs (plain, cache hits, or followers of an identical job in flight) and
cancelling them, workers claiming (and re-claiming: redelivery), counting attempts,
appending text and finishing with a run id that may be stale, repeating a step whose answer
they lost, the monitor heartbeating, and the sweeper acting on a job whose lease was forced
into the past. Every script is atomic, so a sequence of calls is an interleaving of
concurrent actors.

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
from redis.cluster import RedisCluster

from chatq import keys
from chatq.jobs import record as jobs
from chatq.jobs.results import LeaseState, SweepOutcome
from chatq.jobs.store import Store

pytestmark = pytest.mark.long

DB = 14  # a database of its own: the machine flushes it before every example
LEASE_S = 30.0
MAX_TAKEOVERS = 1
MAX_FOLLOWERS = 2
TERMINAL = jobs.TERMINAL
OWNERS = ("alice", "bob")
# Cache keys (digests) in shard "0", the shard of every job id made here (`job_0...`).
FLIGHTS = ("", "34" + "a" * 62, "74" + "b" * 62)
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
    run_attempt: int = 0
    ended_by: str = ""  # the run whose finish ended the job
    suspect: bool = False  # a sweep found its lease run out; its holder has not renewed since
    last_append: tuple[int, str] | None = None  # (offset in bytes, text) of the run's last


def _db_url(redis_url: str) -> str:
    return redis_url.rsplit("/", 1)[0] + f"/{DB}"


@pytest.fixture(params=["single", "cluster"])
def client(request: pytest.FixtureRequest, redis_url: str) -> Iterator[redis.Redis]:
    """A Redis of its own (a database of the session's), or a 3-primary Redis Cluster."""
    if request.param == "cluster":
        url = request.getfixturevalue("redis_cluster")
        c: redis.Redis = RedisCluster.from_url(url, decode_responses=True)  # type: ignore[assignment]
    else:
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
        elif data["t"] == "end":
            text.append(data.get("d", ""))  # the last piece rides on the end's entry
    return "".join(text)


class JobMachine(RuleBasedStateMachine):
    """The web, workers, monitor and sweeper, acting on one Redis in any order."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__()
        client.flushdb()
        self.redis = client
        self.store = Store(client, job_ttl_s=3600, max_followers=MAX_FOLLOWERS)
        self.cluster = self.store.cluster
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
        fields = ("status", "result", "error")

        def seen(job_id: str) -> tuple[list[str | None], str | None]:
            return self.redis.hmget(keys.job(job_id), fields), self.redis.get(keys.text(job_id))

        for f in follower_ids:
            assert seen(f) == seen(leader_id), (leader_id, f)

    # --- the web -----------------------------------------------------------------------

    @initialize()
    def first_job(self) -> None:
        self.create(OWNERS[0], "")

    @rule(owner=st.sampled_from(OWNERS), flight=st.sampled_from(FLIGHTS))
    def create(self, owner: str, flight: str) -> None:
        self.counter += 1
        job_id = f"job_{self.counter:04d}{'x' * 16}"
        record = jobs.new_record(
            job_id, owner, "fake", "interactive", {"n": self.counter}, time.time()
        )
        leader = self.inflight.get(flight, "") if flight else ""
        created = self.store.create(record=record, lease_s=LEASE_S, flight=flight)
        m = Model(owner=owner)
        live = bool(leader) and self.model[leader].status not in TERMINAL
        if live and len(self.model[leader].followers) >= MAX_FOLLOWERS:
            assert created.kind == "created"  # the leader is full: it runs on its own
        elif live:
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
        record |= {
            "status": jobs.COMPLETED,
            "cached": "1",
            "output_text": text,
            "result": json.dumps({"cached": text}),
            "finish_reason": "stop",
            "started_at": repr(now),
            "completed_at": repr(now),
        }
        assert self.store.create(record=record, lease_s=LEASE_S, cached=True).kind == "created"
        self.model[job_id] = Model(
            owner=owner, status=jobs.COMPLETED, output=text, has_message=False
        )

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
        cancel = self.store.cancel(job_id=job_id, lease_s=LEASE_S)
        if m.status in TERMINAL:
            assert (cancel.status, cancel.detached) == (m.status, ())
            return
        assert cancel.status == jobs.CANCELLED
        assert sorted(cancel.detached) == sorted(m.followers)
        if m.leader:
            self.model[m.leader].followers.discard(job_id)
        for f in m.followers:
            fm = self.model[f]
            fm.leader, fm.status, fm.output, fm.has_message = "", jobs.QUEUED, "", True
        m.followers = set()
        if m.flight and self.inflight.get(m.flight) == job_id:
            del self.inflight[m.flight]
        m.status, m.run = jobs.CANCELLED, ""

    @rule(data=st.data())
    def watch(self, data: st.DataObject) -> None:
        """A request follows a job's events: only a queued job has a start to announce."""
        job_id = self._choose(data, lambda m: True)
        if job_id is not None:
            assert self.store.watch(job_id=job_id) == (self.model[job_id].status == jobs.QUEUED)

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
        claim = self.store.claim(job_id=job_id, run_id=run, lease_s=LEASE_S)
        if m.status != jobs.QUEUED:
            assert (claim.claimed, claim.status) == (False, m.status)
            return
        assert claim.claimed and claim.owner == m.owner
        m.run, m.run_attempt, m.last_append = run, 1, None
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
            assert not self.store.begin_attempt(job_id=job_id, run_id=run, attempt=9)
        elif call == "append":
            offset = len(m.output.encode())
            assert not self.store.append(job_id=job_id, run_id=run, offset_bytes=offset, text=text)
        else:
            # Only the run that completed the job hears "done" again (a repeated finish).
            again = run == m.ended_by and m.status == jobs.COMPLETED
            assert (
                self.store.finish(
                    job_id=job_id,
                    run_id=run,
                    status=jobs.COMPLETED,
                    fields={"result": "{}"},
                    tail=text,
                )
                is again
            )

    @rule(data=st.data(), again=st.booleans())
    def begin_attempt(self, data: st.DataObject, again: bool) -> None:
        """The next attempt of a run, or (again) the current one repeated after a lost answer."""
        if (picked := self._running(data)) is None:
            return
        job_id, run = picked
        m = self.model[job_id]
        ours = self._owned(job_id, run)
        attempt = m.run_attempt if again else m.run_attempt + 1
        assert self.store.begin_attempt(job_id=job_id, run_id=run, attempt=attempt) is ours
        if ours and not again:
            m.run_attempt, m.last_append = attempt, None
            for j in self._group(job_id):
                self.model[j].output = ""

    @rule(data=st.data(), text=texts)
    def append(self, data: st.DataObject, text: str) -> None:
        if (picked := self._running(data)) is None:
            return
        job_id, run = picked
        m = self.model[job_id]
        ours = self._owned(job_id, run)
        offset = len(m.output.encode())
        assert self.store.append(job_id=job_id, run_id=run, offset_bytes=offset, text=text) is ours
        if ours:
            m.last_append = (offset, text)
            for j in self._group(job_id):
                self.model[j].output += text

    @rule(data=st.data())
    def append_again(self, data: st.DataObject) -> None:
        """A worker repeats its last append, whose answer it lost: the text is not doubled."""
        job_id = self._choose(data, lambda m: m.last_append is not None and bool(m.run))
        if job_id is None:
            return
        m = self.model[job_id]
        assert m.last_append is not None
        offset, text = m.last_append
        ours = self._owned(job_id, m.run)
        assert (
            self.store.append(job_id=job_id, run_id=m.run, offset_bytes=offset, text=text) is ours
        )

    @rule(data=st.data(), text=texts, status=st.sampled_from([jobs.COMPLETED, jobs.FAILED]))
    def finish(self, data: st.DataObject, text: str, status: str) -> None:
        if (picked := self._running(data)) is None:
            return
        job_id, run = picked
        ours = self._owned(job_id, run)
        fields = (
            {"result": json.dumps({"run": run}), "finish_reason": "stop"}
            if status == jobs.COMPLETED
            else {"error": json.dumps({"code": "x"})}
        )
        finished = self.store.finish(
            job_id=job_id, run_id=run, status=status, fields=fields, tail=text, finish_reason="stop"
        )
        assert finished is ours
        if not ours:
            return
        # A worker that lost the answer finishes again: the same answer, nothing changes.
        assert self.store.finish(
            job_id=job_id, run_id=run, status=status, fields=fields, tail=text, finish_reason="stop"
        )
        followers = sorted(self.model[job_id].followers)
        self.model[job_id].ended_by = run
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
        expected = (
            LeaseState.HELD
            if self._owned(job_id, run)
            else LeaseState.CANCELLED
            if self.model[job_id].status == jobs.CANCELLED
            else LeaseState.LOST
        )
        states = self.store.heartbeat(runs=[(job_id, run)], lease_s=LEASE_S, worker="w", slots=1)
        assert states == [expected]
        if expected is LeaseState.HELD:
            self.model[job_id].suspect = False  # its holder is alive after all

    @rule(data=st.data(), noted_long_ago=st.booleans())
    def sweep_after_lease_expired(self, data: st.DataObject, noted_long_ago: bool) -> None:
        """The holder stopped renewing: force the lease into the past, run the sweeper's step.
        A running job is only noted, unless (noted_long_ago) a sweep noted it a lease ago."""
        job_id = self._choose(data, lambda m: m.status not in TERMINAL and not m.leader)
        if job_id is None:
            return
        m = self.model[job_id]
        self.redis.zadd(keys.leases_of(job_id, self.cluster), {job_id: 0}, xx=True)
        if noted_long_ago and m.status == jobs.IN_PROGRESS:
            self.redis.hset(keys.job(job_id), "suspect", "0")
        swept = self.store.sweep(lease_s=LEASE_S, resend_s=LEASE_S, max_takeovers=MAX_TAKEOVERS)
        # Jobs noted earlier are still due: noted again, nothing more, until a lease passes.
        others = [(s.job_id, s.outcome) for s in swept if s.job_id != job_id]
        assert all(o is SweepOutcome.SUSPECT and self.model[j].suspect for j, o in others)
        (outcome,) = [s.outcome for s in swept if s.job_id == job_id]
        if m.status == jobs.QUEUED:
            assert outcome is SweepOutcome.QUEUED  # the caller resends it only if lost
        elif not noted_long_ago:
            assert outcome is SweepOutcome.SUSPECT  # Redis may have been away, not the worker
            m.suspect = True
        else:
            m.suspect = False
            m.takeovers += 1
            if m.takeovers > MAX_TAKEOVERS:
                assert outcome is SweepOutcome.FAILED
                followers = sorted(m.followers)
                self._close_group(job_id, jobs.FAILED)
                self._assert_followers_match(job_id, followers)
            else:
                assert outcome is SweepOutcome.REQUEUED
                m.run, m.has_message, m.last_append = "", True, None
                for j in self._group(job_id):
                    self.model[j].status = jobs.QUEUED

    # --- invariants --------------------------------------------------------------------

    def _read_all(
        self,
    ) -> list[tuple[str, dict[str, str], list[tuple[str, dict[str, str]]], float | None]]:
        """Each job's record (with its text as `output_text`), events and lease."""
        pipe = self.redis.pipeline(transaction=False)
        ids = sorted(self.model)
        for job_id in ids:
            pipe.hgetall(keys.job(job_id))
            pipe.get(keys.text(job_id))
            pipe.xrange(keys.events(job_id))
            pipe.zscore(keys.leases_of(job_id, self.cluster), job_id)
        out = pipe.execute()
        return [
            (
                job_id,
                {**out[4 * i], "output_text": out[4 * i + 1] or ""},
                out[4 * i + 2],
                out[4 * i + 3],
            )
            for i, job_id in enumerate(ids)
        ]

    @invariant()
    def redis_agrees_with_the_rules(self) -> None:
        for job_id, record, events, lease in self._read_all():
            m = self.model[job_id]
            assert record, f"{job_id} disappeared"
            # Every job has its owner, and the status and text the rules say.
            assert record.get("owner") == m.owner, (job_id, record)
            assert record["status"] == m.status, (job_id, record["status"], m)
            assert ("suspect" in record) == m.suspect, (job_id, record, m)
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
            lease_of_leader = self.redis.zscore(keys.leases_of(leader, self.cluster), leader)
            assert lease_of_leader is not None, (job_id, leader)
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


def _flight(shard: str) -> str:
    """A cache key (a digest) in `shard`: identical requests are placed in their key's."""
    return f"{keys.SHARDS.index(shard):02x}" + "0" * 62


def _run(client: redis.Redis, examples: int, steps: int) -> None:
    run_state_machine_as_test(
        lambda: JobMachine(client),
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_no_interleaving_of_actors_breaks_the_job_state_machine(client: redis.Redis) -> None:
    _run(client, examples=60, steps=40)


@pytest.mark.slow
def test_no_interleaving_of_actors_breaks_the_job_state_machine_long(
    client: redis.Redis,
) -> None:
    _run(client, examples=400, steps=60)


def test_a_terminal_job_ignores_every_later_transition(client: redis.Redis) -> None:
    """The promise spelled out once, in plain steps: nothing moves a completed job."""
    store = Store(client, job_ttl_s=3600)
    job_id = "job_" + "t" * 32
    store.create(
        record=jobs.new_record(job_id, "alice", "fake", "interactive", {}, time.time()),
        lease_s=LEASE_S,
    )
    assert store.claim(job_id=job_id, run_id="r1", lease_s=LEASE_S).claimed
    assert store.append(job_id=job_id, run_id="r1", offset_bytes=0, text="hello")
    assert store.finish(
        job_id=job_id,
        run_id="r1",
        status=jobs.COMPLETED,
        fields={"result": "{}"},
        tail=" world",
        finish_reason="stop",
    )
    before = (client.hgetall(keys.job(job_id)), client.xlen(keys.events(job_id)))
    assert store.claim(job_id=job_id, run_id="r2", lease_s=LEASE_S).status == jobs.COMPLETED
    assert not store.begin_attempt(job_id=job_id, run_id="r1", attempt=2)
    assert not store.append(job_id=job_id, run_id="r1", offset_bytes=11, text="late")
    assert not store.finish(job_id=job_id, run_id="r1", status=jobs.FAILED, fields={"error": "{}"})
    assert store.cancel(job_id=job_id, lease_s=LEASE_S).status == jobs.COMPLETED
    client.zadd(keys.leases_of(job_id, store.cluster), {job_id: 0})
    swept = store.sweep(lease_s=LEASE_S, resend_s=LEASE_S, max_takeovers=MAX_TAKEOVERS)
    assert [(s.job_id, s.outcome) for s in swept] == [(job_id, SweepOutcome.GONE)]
    assert store.heartbeat(runs=[(job_id, "r1")], lease_s=LEASE_S, worker="w", slots=1) == [
        LeaseState.LOST
    ]
    after = (client.hgetall(keys.job(job_id)), client.xlen(keys.events(job_id)))
    assert after == before
    assert client.get(keys.text(job_id)) == "hello world"


def test_a_follower_joining_a_running_job_starts_now_not_in_the_future(
    client: redis.Redis,
) -> None:
    store = Store(client, job_ttl_s=3600)
    lease_s = 600.0
    now = time.time()
    leader = jobs.new_record("job_" + "l" * 32, "alice", "fake", "interactive", {}, now)
    follower = jobs.new_record("job_l" + "f" * 31, "alice", "fake", "interactive", {}, now)
    assert store.create(record=leader, lease_s=lease_s, flight=_flight("l")).kind == "created"
    assert store.claim(job_id=leader["id"], run_id="r1", lease_s=lease_s).claimed
    assert store.create(record=follower, lease_s=lease_s, flight=_flight("l")).kind == "follower"
    started = float(client.hget(keys.job(follower["id"]), "started_at") or 0)
    assert store.finish(
        job_id=leader["id"], run_id="r1", status=jobs.COMPLETED, fields={"result": "{}"}
    )
    completed = float(client.hget(keys.job(follower["id"]), "completed_at") or 0)
    assert now - 1 <= started <= completed <= time.time() + 1, (now, started, completed)


def test_a_leader_ends_with_one_copy_of_its_record_on_the_channel(
    client: redis.Redis,
) -> None:
    """Followers' last notifications carry no record: a leader with many would flood it."""
    store = Store(client, job_ttl_s=3600)
    ids = [f"job_a{'xyz'[i]}{'n' * 30}" for i in range(3)]
    for job_id in ids:
        record = jobs.new_record(job_id, "alice", "fake", "interactive", {}, time.time())
        store.create(record=record, lease_s=LEASE_S, flight=_flight("a"))
    assert store.claim(job_id=ids[0], run_id="r1", lease_s=LEASE_S).claimed
    pubsub = client.pubsub()
    channel = keys.notify("a")  # the shard of the three jobs
    sharded = isinstance(client, RedisCluster)  # a Cluster's notifications: sharded pub/sub
    (pubsub.ssubscribe if sharded else pubsub.subscribe)(channel)
    get = pubsub.get_sharded_message if sharded else pubsub.get_message
    assert get(timeout=1)["type"] in ("subscribe", "ssubscribe")
    assert store.finish(
        job_id=ids[0],
        run_id="r1",
        status=jobs.COMPLETED,
        fields={"result": "{}"},
        tail="a long answer",
    )
    messages = []
    while (message := get(timeout=0.5)) is not None:
        messages.append(message["data"])
    pubsub.close()
    finals = [m.split(" ", 2) for m in messages if m.split(" ")[1] == jobs.COMPLETED]
    assert sorted(f[0] for f in finals) == sorted(ids)
    records = [json.loads(f[2]) for f in finals if len(f) == 3]
    assert [r["id"] for r in records] == [ids[0]]
    assert records[0]["output_text"] == "a long answer" and "request" not in records[0]


def test_a_claim_announces_its_start_only_when_a_request_watches(client: redis.Redis) -> None:
    """Waiters for a job's end need no word of its start: only a watched job's claim sends it
    (one PUBLISH less per job)."""
    store = Store(client, job_ttl_s=3600)
    ids = [f"job_b{'xy'[i]}{'n' * 30}" for i in range(2)]
    for job_id in ids:
        record = jobs.new_record(job_id, "alice", "fake", "interactive", {}, time.time())
        store.create(record=record, lease_s=LEASE_S)
    assert store.watch(job_id=ids[1])
    pubsub = client.pubsub()
    sharded = isinstance(client, RedisCluster)
    (pubsub.ssubscribe if sharded else pubsub.subscribe)(keys.notify("b"))
    get = pubsub.get_sharded_message if sharded else pubsub.get_message
    assert get(timeout=1)["type"] in ("subscribe", "ssubscribe")
    for job_id in ids:
        assert store.claim(job_id=job_id, run_id="r1", lease_s=LEASE_S).claimed
    messages = []
    while (message := get(timeout=0.5)) is not None:
        messages.append(message["data"])
    pubsub.close()
    assert messages == [f"{ids[1]} {jobs.IN_PROGRESS}"]
    assert not store.watch(job_id=ids[0])  # in progress: nothing left to announce
    assert not store.watch(job_id="job_" + "b" * 32)  # no such job: nothing written
    assert not client.exists(keys.job("job_" + "b" * 32))
