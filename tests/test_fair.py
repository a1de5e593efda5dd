"""Fair dispatch across tenants: the order workers read the tenants' queues in (in-process),
and on real processes a light tenant served before a flood's later jobs and a tenant held to
its running cap."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import pytest
import redis
import requests

from chatq import keys
from chatq.admission import fairness
from chatq.broker import backlog as broker
from chatq.config import settings as config
from chatq.jobs import record as jobs
from chatq.jobs.results import SweepOutcome
from chatq.jobs.store import Store
from scripts.localredis import LocalRedis, free_port
from tests.conftest import Stack, start_stack
from tests.procs import (
    ALICE_KEY,
    BOB_KEY,
    Proc,
    base_env,
    start_fakellm,
    start_web,
    start_worker,
    wait_until,
    wait_web_up,
    wait_worker_ready,
)

PLAN = fairness.Plan(tenants=("alice", "bob", "carol"), weights=(("alice", 2),))
ALL = [q for lane in fairness.LANES for q in PLAN.lane_queues(lane)] + ["webhooks"]
KOMBU_BRPOP_S = 1.0  # kombu's Redis transport default (`brpop_timeout`)


class Capped:
    """Stands in for the store's running counts: the tenants it is told are at their cap."""

    def __init__(self, *tenants: str) -> None:
        self.tenants = frozenset(tenants)

    def capped(self) -> frozenset[str]:
        return self.tenants

    def taken(self, tenant: str) -> None:
        pass


def _cycle(running: Capped | None = None) -> fairness.TenantCycle:
    cycle = fairness.TenantCycle(PLAN, running)  # type: ignore[arg-type]
    cycle.update(ALL)
    return cycle


def test_every_interactive_queue_is_read_before_any_batch_one_and_webhooks_last() -> None:
    order = _cycle().consume(len(ALL))
    assert order == [
        "interactive.alice",
        "interactive.bob",
        "interactive.carol",
        "interactive",
        "batch.alice",
        "batch.bob",
        "batch.carol",
        "batch",
        "webhooks",
    ]


def test_a_tenant_stays_first_for_its_weight_then_goes_last() -> None:
    cycle = _cycle()
    firsts = []
    for _ in range(8):
        first = cycle.consume(len(ALL))[0]
        firsts.append(first.partition(".")[2])
        cycle.rotate(first)
    assert firsts == ["alice", "alice", "bob", "carol"] * 2


def test_lanes_turn_on_their_own_and_the_lanes_own_queue_never_turns() -> None:
    cycle = _cycle()
    cycle.rotate("batch.alice")
    cycle.rotate("batch.alice")
    cycle.rotate("interactive")
    order = cycle.consume(len(ALL))
    assert order[:4] == ["interactive.alice", "interactive.bob", "interactive.carol", "interactive"]
    assert order[4:8] == ["batch.bob", "batch.carol", "batch.alice", "batch"]


def test_tenants_at_their_cap_are_not_read() -> None:
    order = _cycle(Capped("alice")).consume(len(ALL))
    assert "interactive.alice" not in order and "batch.alice" not in order
    assert order[0] == "interactive.bob" and order[-1] == "webhooks"


def test_only_the_queues_consumed_are_read() -> None:
    cycle = _cycle()
    cycle.update(["batch.bob", "interactive.bob", "webhooks"])
    assert cycle.consume(3) == ["interactive.bob", "batch.bob", "webhooks"]


def test_the_running_counts_come_from_the_store_and_count_what_this_process_took(
    redis_url: str,
) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    plan = fairness.Plan(tenants=("dora", "erin"), max_running_overrides=(("dora", 1), ("erin", 2)))
    client.delete(keys.tenant_running("dora"), keys.tenant_running("erin"))
    client.sadd(keys.tenant_running("dora"), "job_a")
    client.sadd(keys.tenant_running("erin"), "job_b")
    try:
        running = fairness.RunningCounts(plan, lambda: client)
        assert running.capped() == {"dora"}
        running.taken("erin")  # one more, before the store says so
        assert running.capped() == {"dora", "erin"}
        time.sleep(fairness.RUNNING_REFRESH_S)
        assert running.capped() == {"dora"}  # read again: the store's count
    finally:
        client.delete(keys.tenant_running("dora"), keys.tenant_running("erin"))


def test_each_live_worker_takes_its_share_of_a_tenants_room() -> None:
    """Two live workers and a gone one: a cap of 5 with 1 running leaves each a share of 2."""
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        now_s = float(client.time()[0])
        beats = {"a:1": f"50 0 {now_s}", "b:2": f"50 3 {now_s}", "gone:3": f"50 9 {now_s - 60}"}
        client.hset(keys.workers(), mapping=beats)
        client.sadd(keys.tenant_running("dora"), "job_a")
        plan = fairness.Plan(tenants=("dora", "erin"), max_running_overrides=(("dora", 5),))
        running = fairness.RunningCounts(plan, lambda: client)
        assert running.capped() == frozenset()
        running.taken("dora")
        running.taken("erin")  # not capped: nothing to count
        assert running.capped() == frozenset()
        running.taken("dora")
        assert running.capped() == {"dora"}  # the other worker may take the other 2
        client.hdel(keys.workers(), "b:2")
        time.sleep(fairness.RUNNING_REFRESH_S)
        assert running.capped() == frozenset()  # read again: alone, the whole room
    finally:
        client.close()
        server.stop()


def test_a_job_waits_in_its_owners_queue_or_its_lanes_own() -> None:
    assert PLAN.queue_for("batch", "bob") == "batch.bob"
    assert PLAN.queue_for("interactive", "dave") == "interactive"
    assert fairness.Plan().lane_queues("batch") == ["batch"]


def test_settings_name_weights_and_caps_of_known_keys_only() -> None:
    env = {
        "CHATQ_API_KEYS": "alice:k1,bob:k2",
        "CHATQ_TENANT_WEIGHTS": "alice:3,bob:1",
        "CHATQ_TENANT_MAX_RUNNING": "4",
        "CHATQ_TENANT_MAX_RUNNING_OVERRIDES": "alice=10 bob=0",
    }
    plan = fairness.plan(config.load(env))
    assert plan.tenants == ("alice", "bob")
    assert (plan.weight("alice"), plan.weight("bob"), plan.cap("alice"), plan.cap("bob")) == (
        3,
        1,
        10,
        0,
    )
    assert fairness.plan(config.load({**env, "CHATQ_FAIR_DISPATCH": "0"})).tenants == ()
    for name, value in [
        ("CHATQ_TENANT_WEIGHTS", "mallory:2"),
        ("CHATQ_TENANT_WEIGHTS", "alice:0"),
        ("CHATQ_TENANT_MAX_RUNNING_OVERRIDES", "alice:3"),
        ("CHATQ_TENANT_MAX_RUNNING", "-1"),
        ("CHATQ_FAIR_DISPATCH", "maybe"),
    ]:
        with pytest.raises(config.ConfigError, match=name):
            config.load({**env, name: value})


def test_a_claim_over_the_cap_parks_the_job_and_the_depth_counts_it_until_sent_again() -> None:
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    store = Store(client, 3600, max_running=5, max_running_overrides=(("carol", 1),))
    ids = ["job_" + c * 32 for c in "ab"]
    try:
        for job_id in ids:
            record = jobs.new_record(job_id, "carol", "fake", "interactive", {}, time.time())
            store.create(record=record, lease_s=10)
        assert store.claim(job_id=ids[0], run_id="r1", lease_s=10).claimed
        assert store.claim(job_id=ids[1], run_id="r2", lease_s=10).status == "capped"
        assert client.hget(keys.job(ids[1]), "status") == jobs.QUEUED
        depths = broker.RedisBroker(client, plan=fairness.Plan(("carol",))).depths()
        assert depths == {"interactive": 1, "batch": 0}  # no message, but it waits
        assert store.finish(job_id=ids[0], run_id="r1", status=jobs.COMPLETED, fields={})
        assert client.scard(keys.tenant_running("carol")) == 0
        client.zadd(keys.leases_of(ids[1]), {ids[1]: 0})  # its lease ran out
        swept = store.sweep(lease_s=10, resend_s=300, max_takeovers=3)
        # Its message was dropped: sent again without asking the broker.
        assert [(j.job_id, j.outcome, j.owner) for j in swept] == [
            (ids[1], SweepOutcome.PARKED, "carol")
        ]
        assert broker.parked_depths(client) == {"interactive": 0, "batch": 0}  # sent again
        client.zadd(keys.leases_of(ids[1]), {ids[1]: 0})  # that message waits a lease too
        swept = store.sweep(lease_s=10, resend_s=300, max_takeovers=3)
        assert [j.outcome for j in swept] == [SweepOutcome.QUEUED]  # the broker is asked now
        assert store.claim(job_id=ids[1], run_id="r3", lease_s=10).claimed  # room now
    finally:
        server.stop()


def test_a_parked_job_is_sent_again_after_its_park_time_or_else_after_a_lease() -> None:
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        for park_s, due_in_s in [(1.0, 1.0), (0.0, 10.0)]:  # 0: the lease, 10 s here
            client.flushall()
            store = Store(client, 3600, max_running_overrides=(("carol", 1),), park_s=park_s)
            ids = ["job_" + c * 32 for c in "ab"]
            for job_id in ids:
                record = jobs.new_record(job_id, "carol", "fake", "interactive", {}, time.time())
                store.create(record=record, lease_s=10)
            assert store.claim(job_id=ids[0], run_id="r1", lease_s=10).claimed
            assert store.claim(job_id=ids[1], run_id="r2", lease_s=10).status == "capped"
            seconds, micros = client.time()
            due_s = client.zscore(keys.leases_of(ids[1]), ids[1])
            assert due_s == pytest.approx(seconds + micros / 1e6 + due_in_s, abs=0.1)
    finally:
        server.stop()


def test_a_job_parks_for_a_second_on_redis_and_for_a_lease_on_rabbitmq() -> None:
    settings = config.load({"CHATQ_LEASE": "10"})
    assert fairness.park_s(settings, amqp=False) == fairness.PARKED_RETRY_S == 1.0
    assert fairness.park_s(settings, amqp=True) == 10.0
    assert fairness.park_s(config.load({"CHATQ_LEASE": "0.5"}), amqp=False) == 0.5


# --- on real processes ------------------------------------------------------------------------

CAROL_KEY = "sk-test-carol-3e81b0c4d2a7"


@pytest.fixture(scope="module")
def fair_stack() -> Iterator[Stack]:
    """A stack on a Redis and a fakellm of its own (tenants' queues and running counts are
    per Redis: another stack's workers would take these jobs): 3 slots, carol capped at 1."""
    server = LocalRedis().start()
    fake, fake_url = start_fakellm()
    env = base_env(
        server.url,
        fake_url,
        CHATQ_API_KEYS=f"alice:{ALICE_KEY},bob:{BOB_KEY},carol:{CAROL_KEY}",
        CHATQ_WORKER_CONCURRENCY="3",
        CHATQ_TENANT_MAX_RUNNING_OVERRIDES="carol=1",
        CHATQ_LEASE="1",
    )
    # Both start at once, then both are waited for: half the wait of one after the other.
    metrics_bind = {"CHATQ_WORKER_METRICS_BIND": f"127.0.0.1:{free_port()}"}
    worker = Proc("worker", ["worker"], {**env, **metrics_bind}).start()
    url = f"http://127.0.0.1:{free_port()}"
    web = Proc("web", ["web"], {**env, "CHATQ_BIND": url.removeprefix("http://")}).start()
    wait_worker_ready(worker)
    wait_web_up(web, url)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    s = Stack(url=url, redis=client, env=env, procs=[worker, web])
    yield s
    s.stop()
    fake.stop()
    server.stop()


def _submit(s: Stack, key: str, count: int, model: str, tag: str) -> list[str]:
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: s.submit(f"{tag} {i}", model, key), range(count)))
    assert {a.status_code for a in answers} == {202}
    return [a.json()["id"] for a in answers]


def _records(s: Stack, ids: list[str]) -> list[dict[str, str]]:
    def ended() -> list[dict[str, str]] | None:
        records = [s.redis.hgetall(keys.job(i)) for i in ids]
        return records if all(r.get("status") == "completed" for r in records) else None

    records: list[dict[str, str]] = wait_until(ended, 60, "every job completed", every_s=0.2)
    return records


def test_a_light_tenant_starts_before_the_later_jobs_of_a_flood(fair_stack: Stack) -> None:
    s = fair_stack
    flood = _submit(s, ALICE_KEY, 30, "fake:ttft=0.1", "flood")
    light = _submit(s, BOB_KEY, 3, "fake:ttft=0.1", "light")
    flood_started = sorted(float(r["started_at"]) for r in _records(s, flood))
    for record in _records(s, light):
        # Flood jobs started while this one waited: about one per light job ahead of it
        # (each tenant in turn), never the whole backlog as in one FIFO queue.
        waited = [t for t in flood_started if float(record["created_at"]) < t]
        before = [t for t in waited if t < float(record["started_at"])]
        assert len(before) <= 3 + 2 * 3, (len(before), len(waited))
        assert len(waited) - len(before) >= 10  # the flood was still waiting behind it
    assert all(int(r["attempts"]) == 1 for r in _records(s, flood + light))


def _most_at_once(records: list[dict[str, str]]) -> int:
    edges = sorted(
        [(float(r["started_at"]), 1) for r in records]
        + [(float(r["completed_at"]), -1) for r in records]
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def test_a_tenant_never_runs_more_than_its_cap_and_others_run_beside_it(
    fair_stack: Stack,
) -> None:
    s = fair_stack
    capped = _submit(s, CAROL_KEY, 5, "fake:ttft=0.3", "capped")
    free = _submit(s, BOB_KEY, 2, "fake:ttft=0.3", "free")
    carol, bob = _records(s, capped), _records(s, free)
    assert _most_at_once(carol) == 1
    assert _most_at_once(carol + bob) == 3  # bob has no cap: both beside carol's one
    assert all(int(r["attempts"]) == 1 for r in carol + bob)  # a parked claim runs nothing
    assert s.redis.scard(keys.tenant_running("carol")) == 0
    assert broker.parked_depths(s.redis) == {"interactive": 0, "batch": 0}


def test_a_tenant_at_its_cap_takes_its_next_job_soon_after_one_ends(fair_stack: Stack) -> None:
    s = fair_stack
    records = _records(s, _submit(s, CAROL_KEY, 8, "fake:ttft=0.3", "turns"))
    records.sort(key=lambda r: float(r["started_at"]))
    gaps_s = [float(b["started_at"]) - float(a["completed_at"]) for a, b in pairwise(records)]
    assert min(gaps_s) >= 0  # one at a time
    # The worker's read leaves carol out while she is at her cap and must end to take her
    # back: with kombu's 1 s BRPOP her next job waited about half of it at the median.
    assert statistics.median(gaps_s) < KOMBU_BRPOP_S / 2, gaps_s


def test_a_parked_job_runs_soon_after_its_tenant_has_room_not_a_lease_later() -> None:
    server = LocalRedis().start()
    fake, fake_url = start_fakellm()
    lease_s = 6.0
    env = {
        "CHATQ_API_KEYS": f"alice:{ALICE_KEY},bob:{BOB_KEY},carol:{CAROL_KEY}",
        "CHATQ_WORKER_CONCURRENCY": "2",
        "CHATQ_TENANT_MAX_RUNNING_OVERRIDES": "carol=1",
        "CHATQ_LEASE": str(lease_s),
    }
    s = start_stack(server.url, fake_url, **env)
    try:
        # The sweeper sends nothing until its worker has reached Redis for a whole lease.
        time.sleep(lease_s - 1)
        first = s.submit("first", "fake:ttft=1", CAROL_KEY).json()["id"]
        wait_until(lambda: s.redis.hget(keys.job(first), "status") == jobs.IN_PROGRESS, 10, "1st")
        second = s.submit("second", "fake:ttft=0.1", CAROL_KEY).json()["id"]

        def is_parked() -> bool:
            return s.redis.hget(keys.job(second), "parked") == "1"

        # Parked already if a worker's count of carol's jobs was a moment old; else waiting.
        wait_until(lambda: is_parked() or s.redis.llen("interactive.carol") == 1, 10, "2nd")
        # As if sent before fair dispatch was on: workers read the lane's own queue whatever
        # its jobs' tenants, so the claim finds carol at her cap and parks the job.
        s.redis.lmove("interactive.carol", "interactive", "RIGHT", "LEFT")
        wait_until(is_parked, 10, "the second job parked")
        ran, parked = _records(s, [first, second])
        waited_s = float(parked["started_at"]) - float(ran["completed_at"])
        # Sent again within a second and a sweep (1 s), not once its lease (6 s) ran out.
        assert waited_s < 2.5, waited_s
        assert int(parked["attempts"]) == 1
    finally:
        s.stop()
        fake.stop()
        server.stop()


def _submit_loop(url: str, key: str, tag: str, count: int, every_s: float) -> list[str]:
    """Submit `count` jobs to the web at `url`; the ids it accepted (a killed web accepts
    none: its requests fail)."""
    accepted = []
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    for i in range(count):
        body = {"model": "fake:ttft=0.5", "messages": [{"role": "user", "content": f"{tag} {i}"}]}
        try:
            answer = session.post(f"{url}/v1/jobs", json=body, timeout=10)
        except requests.RequestException:
            continue
        if answer.status_code == 202:
            accepted.append(answer.json()["id"])
        time.sleep(every_s)
    return accepted


@pytest.mark.slow
def test_a_worker_and_a_web_killed_during_a_flood_lose_nothing_and_run_nothing_twice() -> None:
    server = LocalRedis().start()
    fake, fake_url = start_fakellm()
    # A cap above the 40 slots: alice's running jobs are counted (and must all be uncounted
    # at the end), none is parked.
    env = base_env(
        server.url,
        fake_url,
        CHATQ_WORKER_CONCURRENCY="20",
        CHATQ_LEASE="2",
        CHATQ_QUEUE_RESEND="2",
        CHATQ_TENANT_MAX_RUNNING="100",
    )
    procs = [start_worker(env, server.url) for _ in range(2)]
    webs = [start_web(env) for _ in range(2)]
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        with ThreadPoolExecutor(6) as pool:
            floods = [
                pool.submit(_submit_loop, webs[i % 2][1], ALICE_KEY, f"flood {i}", 60, 0.0)
                for i in range(4)
            ]
            light = pool.submit(_submit_loop, webs[1][1], BOB_KEY, "light", 30, 0.1)
            wait_until(lambda: client.scard(keys.tenant_running("alice")) >= 20, 20, "a flood")
            procs[0].kill()  # a worker with its jobs in flight
            webs[0][0].kill()  # a web in the middle of its submissions
            accepted = [i for f in floods for i in f.result()] + light.result()
        ids = [k.rpartition(":")[2] for k in client.scan_iter(keys.jobs_pattern(), count=1000)]
        assert set(accepted) <= set(ids)  # every 202 has its job (and a few more, never told)

        def ended() -> list[dict[str, str]] | None:
            records = [client.hgetall(keys.job(i)) for i in ids]
            return records if all(r["status"] == "completed" for r in records) else None

        records = wait_until(ended, 90, "every job made completed", every_s=0.5)
        calls = int(
            requests.get(fake_url.removesuffix("/v1") + "/stats", timeout=5).json()["requests"]
        )
        taken_over = sum(int(r.get("takeovers") or 0) for r in records)
        # One call per job, plus at most one per job whose worker was killed during its call.
        assert len(ids) <= calls <= len(ids) + taken_over, (calls, len(ids), taken_over)
        assert 0 < taken_over <= 20
        assert client.scard(keys.tenant_running("alice")) == 0
    finally:
        for proc in [*procs, *(web for web, _ in webs), fake]:
            proc.stop()
        server.stop()
