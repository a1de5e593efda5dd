"""rediss:// behind Sentinel: the Sentinel and the primary it names both speak TLS only, and
every client of chatq (the state, Celery's broker, the rate limiter) verifies both against
CHATQ_REDIS_CA_FILE, and refuses another CA."""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import trustme
from kombu.exceptions import OperationalError

from chatq.broker.celery_app import make_celery
from chatq.config.settings import Settings
from chatq.topology import connections as redis_conn
from scripts.localredis import free_port, redis_server_binary
from tests.tls_redis import TlsRedis, write_ca
from web.admission.control import Admission

MASTER = "chatq-tls"


class TlsSentinel:
    """One Sentinel on a TLS port only, watching `primary` over TLS (quorum 1)."""

    def __init__(self, folder: Path, ca: trustme.CA, primary: TlsRedis) -> None:
        self.port = free_port()
        cert = ca.issue_cert("127.0.0.1")
        cert_path, key_path = folder / "sentinel.pem", folder / "sentinel.key"
        cert.cert_chain_pems[0].write_to_path(str(cert_path))
        cert.private_key_pem.write_to_path(str(key_path))
        self.config = folder / "sentinel.conf"
        self.config.write_text(
            f"port 0\ntls-port {self.port}\nbind 127.0.0.1\ndir {folder}\n"
            f"tls-cert-file {cert_path}\ntls-key-file {key_path}\n"
            f"tls-ca-cert-file {primary.ca_path}\ntls-auth-clients no\ntls-replication yes\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {primary.port} 1\n"
        )
        self.process = subprocess.Popen(
            [redis_server_binary(), str(self.config), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        """Stop it."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture(scope="module")
def behind_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings naming the TLS Sentinel, with the CA that signed both certificates."""
    folder = tmp_path_factory.mktemp("sentinel-tls")
    ca = trustme.CA()
    primary = TlsRedis(folder, ca).start()
    sentinel = TlsSentinel(folder, ca, primary)
    settings = Settings(
        redis_url="rediss://ignored:1/0",
        redis_ca_file=primary.ca_path,
        redis_sentinels=(("127.0.0.1", sentinel.port),),
        redis_master_name=MASTER,
        rate_limit="100/hour",
    )
    deadline = time.monotonic() + 10
    while not _state_answers(settings):
        assert time.monotonic() < deadline, "the TLS Sentinel never named its primary"
        time.sleep(0.1)
    yield settings
    sentinel.stop()
    primary.stop()


def _state_answers(settings: Settings) -> bool:
    try:
        return bool(redis_conn.connect_state(settings, max_connections=2).ping())
    except redis.ConnectionError:
        return False


def _broker_answers(settings: Settings) -> bool:
    app = make_celery(settings)
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
            return bool(conn.default_channel.client.ping())
    except OperationalError:
        return False


def _rate_limiter_answers(settings: Settings) -> bool:
    admission = Admission(settings, redis_conn.connect_state(settings, max_connections=2))
    try:
        admission.check_rate("tls-probe")
        return True
    except redis.ConnectionError:
        return False


CLIENTS = [_state_answers, _broker_answers, _rate_limiter_answers]


@pytest.mark.parametrize("client", CLIENTS, ids=["state", "celery-broker", "rate-limiter"])
def test_each_client_reaches_the_primary_through_a_tls_sentinel_and_checks_both(
    behind_tls: Settings, client: Callable[[Settings], bool], tmp_path: Path
) -> None:
    assert client(behind_tls)
    wrong = write_ca(trustme.CA(), tmp_path, "wrong-ca")
    assert not client(dataclasses.replace(behind_tls, redis_ca_file=wrong))
