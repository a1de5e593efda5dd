"""deploy/keda/rabbitmq/: the KEDA ScaledObject for a chatq on RabbitMQ, checked against KEDA's
CRD schema (tests/test_deploy.py fetches it) and against what chatq declares and runs."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from chatq.broker import rabbitmq
from chatq.broker.celery_app import make_celery
from chatq.config.settings import load
from tests.test_deploy import (  # noqa: F401
    KEDA_DIR,
    _container_env,
    _deployment,
    _scaledobject,
    _schema_errors,
    _worker_container,
    deployment_validator,
    keda_schemas,
)

RABBIT_FILE = KEDA_DIR / "rabbitmq" / "scaledobject.yaml"


def _documents() -> dict[str, dict[str, Any]]:
    """The file's documents by kind."""
    return {doc["kind"]: doc for doc in yaml.safe_load_all(RABBIT_FILE.read_text())}


def test_the_rabbitmq_scaledobject_and_its_authentication_are_valid_keda_objects(
    keda_schemas: dict[str, Any],  # noqa: F811
) -> None:
    docs = _documents()
    assert set(docs) == {"ScaledObject", "TriggerAuthentication"}
    for kind, doc in docs.items():
        assert doc["apiVersion"] == "keda.sh/v1alpha1"
        assert _schema_errors(keda_schemas[kind], doc) == [], kind
    broken = copy.deepcopy(docs["ScaledObject"])
    broken["spec"]["triggers"][0]["metadata"]["value"] = 80  # metadata values are strings
    del broken["spec"]["triggers"][0]["type"]  # required
    errors = "\n".join(_schema_errors(keda_schemas["ScaledObject"], broken))
    assert "spec/triggers/0/metadata/value" in errors and "'type' is a required" in errors


def test_it_counts_chatq_s_jobs_queue_waiting_and_running_per_worker_share() -> None:
    docs = _documents()
    spec = docs["ScaledObject"]["spec"]
    (trigger,) = spec["triggers"]
    meta = trigger["metadata"]
    assert trigger["type"] == "rabbitmq"
    # The queue chatq's workers consume, as chatq declares it on RabbitMQ.
    app = make_celery(load({"CHATQ_BROKER_URL": "amqp://guest:guest@rabbitmq:5672/chatq"}))
    assert meta["queueName"] == rabbitmq.JOBS_QUEUE == app.conf.task_default_queue
    # Over the management API, unacknowledged (running) jobs count too: demand, not backlog.
    assert (meta["protocol"], meta["mode"]) == ("http", "QueueLength")
    assert meta.get("excludeUnacknowledged", "false") == "false"
    slots = int(_container_env(_worker_container())["CHATQ_WORKER_CONCURRENCY"])
    assert 0 < float(meta["value"]) <= slots
    auth = docs["TriggerAuthentication"]
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    (secret,) = auth["spec"]["secretTargetRef"]
    assert secret["parameter"] == "host"


def test_it_replaces_the_redis_one_for_the_same_worker_deployment() -> None:
    rabbit_one, redis_one = _documents()["ScaledObject"], _scaledobject()
    # Same name: applying one replaces the other, so one Deployment never has two scalers.
    assert rabbit_one["metadata"]["name"] == redis_one["metadata"]["name"]
    assert rabbit_one["spec"]["scaleTargetRef"] == redis_one["spec"]["scaleTargetRef"]
    for key in ("minReplicaCount", "maxReplicaCount", "cooldownPeriod", "advanced", "fallback"):
        assert rabbit_one["spec"][key] == redis_one["spec"][key], key


def test_the_worker_deployment_takes_the_broker_url_from_the_secret_when_set(
    deployment_validator: Any,  # noqa: F811
) -> None:
    env = {e["name"]: e for e in _worker_container()["env"]}
    ref = env["CHATQ_BROKER_URL"]["valueFrom"]["secretKeyRef"]
    assert (ref["name"], ref["key"], ref["optional"]) == ("chatq", "broker-url", True)
    assert list(deployment_validator.iter_errors(_deployment())) == []
