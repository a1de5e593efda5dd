"""CHATQ_WORKER_LANES: a worker runs the jobs of its lanes only, so that batch lines can have
worker processes of their own, beside those of the interactive lane."""

from __future__ import annotations

import pytest

from chatq.admission import fairness
from chatq.broker import backlog as broker
from chatq.broker.celery_app import consumed_queues, make_celery, worker_queues
from chatq.config import settings as config
from tests.conftest import start_stack
from tests.procs import start_worker

KEYS = "alice:sk-test-alice-0000,bob:sk-test-bob-0000"


@pytest.mark.parametrize(
    "raw,lanes",
    [
        ("", ("interactive", "batch")),
        ("batch", ("batch",)),
        (" interactive ", ("interactive",)),
        ("batch,interactive,batch", ("interactive", "batch")),  # lane order, once each
    ],
)
def test_the_lanes_setting_reads_either_lane_or_both(raw: str, lanes: tuple[str, ...]) -> None:
    assert config.load({"CHATQ_WORKER_LANES": raw}).worker_lanes == lanes


def test_an_unknown_lane_or_a_lane_of_its_own_on_rabbitmq_is_refused() -> None:
    with pytest.raises(config.ConfigError, match="CHATQ_WORKER_LANES: no lane 'bulk'"):
        config.load({"CHATQ_WORKER_LANES": "interactive,bulk"})
    rabbit = {"CHATQ_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672//"}
    with pytest.raises(config.ConfigError, match="needs the Redis broker"):
        config.load({**rabbit, "CHATQ_WORKER_LANES": "batch"})
    assert config.load({**rabbit, "CHATQ_WORKER_LANES": "interactive,batch"})


def test_a_lane_s_worker_consumes_its_tenants_queues_and_its_own() -> None:
    app = make_celery(config.load({"CHATQ_API_KEYS": KEYS}))
    assert worker_queues(app, ("interactive", "batch")) == consumed_queues(app)
    assert worker_queues(app, ("batch",)) == ("batch.alice", "batch.bob", "batch")
    interactive = worker_queues(app, ("interactive",))
    assert interactive == ("interactive.alice", "interactive.bob", "interactive")


def test_each_lane_runs_only_on_the_workers_that_take_it(redis_url: str, fakellm: str) -> None:
    db_url = redis_url.rsplit("/", 1)[0] + "/6"
    # The first worker takes the interactive lane only (the web reads no lanes setting):
    # started with the web, at once.
    s = start_stack(db_url, fakellm, workers=1, CHATQ_WORKER_LANES="interactive")
    try:
        s.redis.flushdb()
        batch_job = s.submit("a batch line", priority="batch").json()["id"]
        done = s.submit("interactive", wait=10).json()
        assert done["status"] == "completed"
        # Sent before the interactive job, which has run: a worker that read the batch lane
        # would have taken it first, idle as it was. Its message still waits in its queue.
        queue = fairness.plan(config.load(s.env)).queue_for("batch", "alice")
        assert sum(s.redis.llen(k) for k in broker.queue_keys(queue)) == 1
        assert s.get(batch_job).json()["status"] == "queued"
        s.procs.append(start_worker({**s.env, "CHATQ_WORKER_LANES": "batch"}, ""))
        assert s.get(batch_job, wait=10).json()["status"] == "completed"
        worker_logs = [p.log_text() for p in s.procs if p.name == "worker"]
        assert batch_job not in worker_logs[0] and batch_job in worker_logs[1]
        assert done["id"] in worker_logs[0] and done["id"] not in worker_logs[1]
    finally:
        s.stop()
