"""rediss://: every Redis client of chatq verifies the server's certificate and host name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import requests
import trustme
from kombu.exceptions import OperationalError

from chatq.broker.celery_app import make_celery
from chatq.config import settings as config
from chatq.config.settings import ConfigError, Settings
from chatq.topology import connections as redis_conn
from tests.conftest import start_stack
from tests.procs import (
    ALICE_KEY,
    Proc,
    base_env,
    launch_web,
    start_worker,
    stop_all,
    wait_until,
    wait_web_up,
)
from tests.tls_redis import TlsRedis, write_ca
from web.admission.control import Admission


@pytest.fixture(scope="module")
def tls_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tls")


@pytest.fixture(scope="module")
def tls_redis(tls_folder: Path) -> Iterator[TlsRedis]:
    """A TLS-only Redis whose certificate, for 127.0.0.1, comes from a private CA."""
    folder = tls_folder / "right"
    folder.mkdir()
    server = TlsRedis(folder, trustme.CA()).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def wrong_ca(tls_folder: Path) -> str:
    """Another private CA, which signed nothing the server holds."""
    return write_ca(trustme.CA(), tls_folder, "wrong-ca")


def _state_answers(url: str, ca_file: str) -> bool:
    try:
        return bool(redis_conn.connect(url, max_connections=2, ca_file=ca_file).ping())
    except redis.ConnectionError:
        return False


def _broker_answers(url: str, ca_file: str) -> bool:
    app = make_celery(Settings(redis_url=url, redis_ca_file=ca_file))
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
            return bool(conn.default_channel.client.ping())
    except OperationalError:
        return False


def _rate_limiter_answers(url: str, ca_file: str) -> bool:
    settings = Settings(redis_url=url, redis_ca_file=ca_file, rate_limit="100/hour")
    admission = Admission(settings, redis_conn.connect(url, max_connections=2, ca_file=ca_file))
    try:
        admission.check_rate("tls-probe")
        return True
    except redis.ConnectionError:
        return False


CLIENTS = [_state_answers, _broker_answers, _rate_limiter_answers]


@pytest.mark.parametrize("client", CLIENTS, ids=["state", "celery-broker", "rate-limiter"])
def test_each_redis_client_trusts_the_private_ca_and_refuses_another(
    tls_redis: TlsRedis, wrong_ca: str, client: object
) -> None:
    assert callable(client)
    assert client(tls_redis.url, tls_redis.ca_path)
    assert not client(tls_redis.url, wrong_ca)


@pytest.mark.parametrize("client", CLIENTS, ids=["state", "celery-broker", "rate-limiter"])
def test_each_redis_client_refuses_a_certificate_for_another_host(
    tls_folder: Path, client: object
) -> None:
    folder = tls_folder / f"other-host-{getattr(client, '__name__', 'client')}"
    folder.mkdir()
    server = TlsRedis(folder, trustme.CA(), hostname="redis.example.invalid").start()
    try:
        assert callable(client)
        assert not client(server.url, server.ca_path)
    finally:
        server.stop()


def test_a_job_runs_over_tls_with_a_private_ca(tls_redis: TlsRedis, fakellm: str) -> None:
    stack = start_stack(
        tls_redis.url, fakellm, CHATQ_REDIS_CA_FILE=tls_redis.ca_path, CHATQ_RATE_LIMIT="3/hour"
    )
    try:
        ready = requests.get(f"{stack.url}/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        done = stack.submit("over TLS", wait=30)
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "completed"
        assert [stack.submit("again").status_code for _ in range(3)] == [202, 202, 429]
    finally:
        stack.stop()


def _depth(url: str, auth: dict[str, str]) -> int:
    queue = requests.get(f"{url}/v1/queue", headers=auth, timeout=10).json()
    return int(queue["queues"]["interactive"]["depth"])


def _wait_for_refusal(worker: Proc) -> str:
    def refused_or_ready() -> str:
        text = worker.log_text()
        return text if "Cannot connect to rediss://" in text or "ready." in text else ""

    return str(wait_until(refused_or_ready, 30, "the worker to connect or give up"))


def test_a_wrong_ca_is_refused_by_the_web_and_the_worker(
    tls_redis: TlsRedis, wrong_ca: str, fakellm: str
) -> None:
    good_env = base_env(tls_redis.url, fakellm, CHATQ_REDIS_CA_FILE=tls_redis.ca_path)
    bad_env = {**good_env, "CHATQ_REDIS_CA_FILE": wrong_ca}
    # All three start at once: the run waits for the slowest, not for each in turn.
    (good_web, good_url), (bad_web, bad_url) = launch_web(good_env), launch_web(bad_env)
    bad_worker = Proc("worker", ["worker"], bad_env).start()
    procs = [good_web, bad_web, bad_worker]
    try:
        wait_web_up(good_web, good_url)
        wait_web_up(bad_web, bad_url)
        auth = {"Authorization": f"Bearer {ALICE_KEY}"}
        body = {"messages": [{"role": "user", "content": "queued behind a bad CA"}]}
        queued = requests.post(f"{good_url}/v1/jobs", json=body, headers=auth, timeout=10)
        assert queued.status_code == 202, queued.text
        job_id = queued.json()["id"]
        depth_before = _depth(good_url, auth)

        assert requests.get(f"{bad_url}/readyz", timeout=10).status_code == 503
        log = _wait_for_refusal(bad_worker)
        assert "ready." not in log
        assert "CERTIFICATE_VERIFY_FAILED" in log
        assert "set CHATQ_REDIS_CA_FILE to its CA" in log
        # Nothing took the message: the job waits in the broker for a worker that trusts Redis.
        assert _depth(good_url, auth) == depth_before
        job = requests.get(f"{good_url}/v1/jobs/{job_id}", headers=auth, timeout=10).json()
        assert job["status"] == "queued"
        bad_worker.kill()  # retrying its connection, it would take its whole grace to stop
        procs.append(start_worker(good_env, tls_redis.url))
        done = requests.get(
            f"{good_url}/v1/jobs/{job_id}", params={"wait": 30}, headers=auth, timeout=40
        )
        assert done.json()["status"] == "completed"
    finally:
        stop_all(procs)


def test_a_ca_file_that_is_not_there_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(ConfigError, match="CHATQ_REDIS_CA_FILE"):
        config.load({"CHATQ_REDIS_CA_FILE": str(missing)})
    assert config.load({}).redis_ca_file == ""
