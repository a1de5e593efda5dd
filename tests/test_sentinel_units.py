"""Sentinel settings, the URLs and pools built from them, and writes that WAIT for replicas
(on a real Redis that has none, so WAIT always falls short)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from chatq import keys
from chatq.broker.celery_app import make_celery, sentinel_broker_url
from chatq.config import settings as config
from chatq.config.settings import ConfigError, Settings
from chatq.jobs import record as jobs
from chatq.jobs.store import Store
from chatq.topology import connections as redis_conn
from chatq.topology.replicas import ReplicasBehind, Replication

SENTINELS = "CHATQ_REDIS_SENTINELS"


def test_sentinels_are_host_port_pairs_with_the_sentinel_port_by_default() -> None:
    settings = config.load({SENTINELS: " s1:26380, s2 ,[::1]:26381,", "CHATQ_REDIS_URL": ""})
    assert settings.redis_sentinels == (("s1", 26380), ("s2", 26379), ("::1", 26381))
    assert settings.redis_master_name == "mymaster"
    assert config.load({}).redis_sentinels == ()


@pytest.mark.parametrize("raw", ["s1:port", "s1:0", "s1:70000", ":26379", "[::1"])
def test_a_malformed_sentinel_is_refused_by_name(raw: str) -> None:
    with pytest.raises(ConfigError, match=SENTINELS):
        config.load({SENTINELS: raw})


def test_the_wait_timeout_stays_below_a_redis_reply_timeout() -> None:
    assert config.load({"CHATQ_REDIS_WAIT_TIMEOUT_MS": "4000"}).redis_wait_timeout_ms == 4000
    with pytest.raises(ConfigError, match="CHATQ_REDIS_WAIT_TIMEOUT_MS"):
        config.load({"CHATQ_REDIS_WAIT_TIMEOUT_MS": "5000"})
    with pytest.raises(ConfigError, match="CHATQ_REDIS_MIN_REPLICAS"):
        config.load({"CHATQ_REDIS_MIN_REPLICAS": "-1"})


def test_the_sentinel_password_never_shows_in_a_repr() -> None:
    settings = config.load({"CHATQ_REDIS_SENTINEL_PASSWORD": "hunter2-sentinel"})
    assert "hunter2-sentinel" not in repr(settings)


def _settings(url: str = "redis://:s3cret@ignored:6379/3", **fields: object) -> Settings:
    return Settings(
        redis_url=url,
        redis_sentinels=(("h1", 26379), ("::1", 26380)),
        **fields,  # type: ignore[arg-type]
    )


def test_the_broker_url_names_every_sentinel_with_the_redis_urls_password_and_database() -> None:
    assert sentinel_broker_url(_settings()) == (
        "sentinel://:s3cret@h1:26379/3;sentinel://:s3cret@[::1]:26380/3"
    )
    assert sentinel_broker_url(_settings("redis://ignored/0")) == (
        "sentinel://h1:26379/0;sentinel://[::1]:26380/0"
    )


def test_celery_sends_through_the_sentinels_unless_a_broker_url_is_given() -> None:
    app = make_celery(_settings(redis_master_name="jobs", redis_sentinel_password="sp"))
    assert str(app.conf.broker_url).startswith("sentinel://")
    options = app.conf.broker_transport_options
    assert options["master_name"] == "jobs"
    assert options["sentinel_kwargs"]["password"] == "sp"
    assert options["queue_order_strategy"] == "priority"  # the Redis transport's own, kept
    other = make_celery(_settings(broker_url="redis://broker:6379/0"))
    assert other.conf.broker_url == "redis://broker:6379/0"
    assert "master_name" not in other.conf.broker_transport_options


def test_tls_reaches_the_sentinels_and_the_primary_for_a_rediss_url() -> None:
    app = make_celery(_settings("rediss://:pw@ignored:6380/1"))
    assert app.conf.broker_transport_options["sentinel_kwargs"]["ssl"] is True
    assert app.conf.broker_use_ssl["ssl_check_hostname"] is True
    pool = redis_conn.connect_sentinel(_settings("rediss://:pw@ignored:6380/1")).connection_pool
    assert pool.connection_class.__name__ == "SentinelManagedSSLConnection"


def test_the_state_client_takes_database_and_password_from_the_url() -> None:
    client = redis_conn.connect_state(_settings(), max_connections=7)
    pool = client.connection_pool
    assert isinstance(pool, redis_conn.BlockingSentinelPool)
    assert pool.max_connections == 7 and pool.service_name == "mymaster"
    assert pool.connection_kwargs["db"] == 3 and pool.connection_kwargs["password"] == "s3cret"
    assert redis_conn.primary_address(client) is None  # not connected yet
    assert redis_conn.primary_address(redis.Redis()) is None  # not behind Sentinel


@pytest.fixture()
def lonely(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the tests' Redis, which has no replica."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def _create(store: Store, job_id: str = "") -> str:
    job_id = job_id or "job_" + uuid.uuid4().hex
    record = jobs.new_record(job_id, "alice", "fake", "interactive", {}, time.time())
    store.create(record=record, lease_s=10)
    return job_id


def test_an_accept_no_replica_acknowledges_raises_but_stands_on_the_primary(
    lonely: redis.Redis,
) -> None:
    store = Store(lonely, 3600, replication=Replication(replicas=1, timeout_ms=20))
    job_id = "job_" + uuid.uuid4().hex
    with pytest.raises(ReplicasBehind, match="0 of 1 replicas") as raised:
        _create(store, job_id)
    assert redis_conn.is_backend_error(raised.value)  # so: 503 backend_unavailable
    # The job is there, queued: when its lease ends the sweeper sends its message.
    assert lonely.hget(keys.job(job_id), "status") == jobs.QUEUED


def test_a_replicated_write_loads_its_script_on_a_new_primary(lonely: redis.Redis) -> None:
    store = Store(lonely, 3600, replication=Replication(replicas=0))
    job_id = _create(store)
    lonely.script_flush()  # as a promoted replica that never saw the scripts
    waiting = Store(lonely, 3600, replication=Replication(replicas=1, timeout_ms=10))
    with pytest.raises(ReplicasBehind):
        waiting.cancel(job_id=job_id, lease_s=10)
    assert lonely.hget(keys.job(job_id), "status") == jobs.CANCELLED


def test_an_end_no_replica_acknowledges_is_logged_and_stands(
    lonely: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = _create(Store(lonely, 3600))
    store = Store(lonely, 3600, replication=Replication(replicas=1, timeout_ms=10))
    assert store.claim(job_id=job_id, run_id="r1", lease_s=10).claimed
    with caplog.at_level(logging.WARNING, logger="chatq.jobs.store"):
        assert store.finish(job_id=job_id, run_id="r1", status=jobs.COMPLETED, fields={})
    assert lonely.hget(keys.job(job_id), "status") == jobs.COMPLETED
    assert f"finish of {job_id}: 0 of 1 replicas" in caplog.text
