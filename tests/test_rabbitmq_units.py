"""The RabbitMQ pieces on their own: CHATQ_BROKER_URL and CHATQ_BROKER_API_URL as read, the
Celery app chatq builds for RabbitMQ, and the marks of confirmed messages against a real Redis
and the store's own sweep (a takeover makes the job's message missing again)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from chatq import keys
from chatq.broker import rabbitmq
from chatq.broker.celery_app import broker_url, consumed_queues, make_celery
from chatq.config.settings import ConfigError, Settings, load
from chatq.jobs import record as jobs
from chatq.jobs.results import SweepOutcome
from chatq.jobs.store import Store
from scripts.localredis import LocalRedis
from tests.procs import ALICE_KEY


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    server = LocalRedis().start()
    yield redis.Redis.from_url(server.url, decode_responses=True)
    server.stop()


def test_the_broker_is_the_redis_url_unless_told_otherwise() -> None:
    assert broker_url(load({"CHATQ_REDIS_URL": "redis://r:6379/3"})) == "redis://r:6379/3"
    told = load({"CHATQ_REDIS_URL": "redis://r:6379/3", "CHATQ_BROKER_URL": "amqp://q:5672//"})
    assert broker_url(told) == "amqp://q:5672//"
    assert broker_url(Settings(redis_url="redis://x/1")) == "redis://x/1"


@pytest.mark.parametrize("url", ["kafka://u:pw@host/", f"u:{ALICE_KEY}@host/x", "amqp:/host"])
def test_a_broker_url_of_another_kind_is_a_config_error_that_repeats_no_secret(url: str) -> None:
    with pytest.raises(ConfigError, match="CHATQ_BROKER_URL must start with one of") as err:
        load({"CHATQ_BROKER_URL": url})
    assert ALICE_KEY not in str(err.value) and "pw" not in str(err.value)


def test_the_settings_repr_hides_the_broker_s_password() -> None:
    settings = load(
        {
            "CHATQ_BROKER_URL": f"amqp://chatq:{ALICE_KEY}@rabbit:5672/chatq",
            "CHATQ_BROKER_API_URL": f"https://chatq:{ALICE_KEY}@rabbit:15671",
        }
    )
    assert ALICE_KEY not in repr(settings)
    assert ALICE_KEY not in repr(
        rabbitmq.management_api(settings.broker_url, settings.broker_api_url)
    )


@pytest.mark.parametrize(
    "broker, api, base, vhost, user, password",
    [
        ("amqp://u:p@rabbit:5672/chatq", "", "http://rabbit:15672", "chatq", "u", "p"),
        ("amqps://u:p%40s@rabbit/%2F", "", "https://rabbit:15671", "/", "u", "p@s"),
        ("amqp://rabbit//", "", "http://rabbit:15672", "/", "guest", "guest"),
        ("amqp://u:p@[::1]:5672/v", "", "http://[::1]:15672", "v", "u", "p"),
        (
            "amqp://u:p@rabbit/v",
            "https://mgmt.example:8443/rabbit/",
            "https://mgmt.example:8443/rabbit",
            "v",
            "u",
            "p",
        ),
        ("amqp://u:p@rabbit/v", "http://m:x@mgmt:15672", "http://mgmt:15672", "v", "m", "x"),
    ],
)
def test_the_management_api_is_found_from_the_broker_url(
    broker: str,
    api: str,
    base: str,
    vhost: str,
    user: str,
    password: str,
) -> None:
    found = rabbitmq.management_api(broker, api)
    assert (found.base_url, found.vhost, found.user, found.password) == (
        base,
        vhost,
        user,
        password,
    )


def test_on_rabbitmq_both_lanes_are_priorities_of_one_durable_confirmed_queue() -> None:
    app = make_celery(load({"CHATQ_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672//"}))
    [jobs_queue] = app.conf.task_queues
    assert (jobs_queue.name, jobs_queue.durable) == (rabbitmq.JOBS_QUEUE, True)
    assert jobs_queue.queue_arguments == {"x-max-priority": 1}
    assert rabbitmq.LANE_PRIORITY["interactive"] > rabbitmq.LANE_PRIORITY["batch"]
    assert consumed_queues(app) == (rabbitmq.JOBS_QUEUE,)
    assert app.conf.broker_transport_options == {"confirm_publish": True}
    assert (app.conf.task_acks_late, app.conf.worker_prefetch_multiplier) == (True, 1)
    assert app.conf.worker_cancel_long_running_tasks_on_connection_loss is False
    redis_app = make_celery(load({}))
    assert consumed_queues(redis_app) == ("interactive", "batch")


def _new_job(store: Store, lease_s: float) -> str:
    job_id = jobs.new_job_id()
    request = {"model": "fake", "messages": [{"role": "user", "content": "x"}]}
    store.create(
        record=jobs.new_record(job_id, "alice", "fake", "interactive", request, time.time()),
        lease_s=lease_s,
    )
    return job_id


def test_a_confirmed_message_is_not_missing_until_its_job_is_taken_over(
    client: redis.Redis,
) -> None:
    store, marks = Store(client, 3600), rabbitmq.SentMarks(client)
    sent, unsent = _new_job(store, 0.2), _new_job(store, 0.2)
    marks.mark(sent)
    assert marks.missing([sent, unsent]) == [unsent]
    # The job runs, its worker dies: the sweep notes the lease, then takes the job over.
    assert store.claim(job_id=sent, run_id="r1", lease_s=0.2).claimed
    outcomes: list[SweepOutcome] = []
    while SweepOutcome.REQUEUED not in outcomes:
        time.sleep(0.25)
        outcomes += [
            s.outcome
            for s in store.sweep(lease_s=0.2, resend_s=60, max_takeovers=3)
            if s.job_id == sent
        ]
    # Its first message is spent: until the new generation's is confirmed, it is missing.
    assert marks.missing([sent]) == [sent]
    marks.mark(sent)
    assert marks.missing([sent]) == []


def test_marking_a_job_that_is_gone_leaves_nothing_behind(client: redis.Redis) -> None:
    gone = jobs.new_job_id()
    rabbitmq.SentMarks(client).mark(gone)
    assert client.exists(keys.job(gone)) == 0


def test_on_rabbitmq_a_worker_s_connection_beats_every_few_seconds() -> None:
    """RabbitMQ stops delivering to a vanished worker host once its heartbeats stop."""
    app = make_celery(load({"CHATQ_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672//"}))
    assert app.conf.broker_heartbeat == 5.0
    redis_app = make_celery(load({}))
    assert redis_app.conf.broker_heartbeat == 120  # Celery's default, unused by Redis
