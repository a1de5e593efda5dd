"""A worker whose metrics port is taken says so in one line and exits, before taking any job."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest

from tests.procs import Proc, base_env, wait_until

EXIT_WAIT_S = 60


@pytest.fixture
def taken_address() -> Iterator[str]:
    """A loopback host:port that a socket of this test listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _exits(proc: Proc) -> int:
    """The worker's exit code; the test fails if it is still running after EXIT_WAIT_S."""
    assert proc.process is not None
    try:
        return proc.process.wait(EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.stop()
        pytest.fail(f"the worker kept running without its metrics:\n{proc.log_text()[-2000:]}")


@pytest.mark.parametrize(
    "argv",
    [
        ["worker"],
        ["celery", "-A", "worker", "worker", "--pool=threads", "--concurrency=2"],
    ],
    ids=["python-m-worker", "celery-a-worker"],
)
def test_a_taken_metrics_port_is_one_clear_line_and_a_non_zero_exit(
    redis_url: str, fakellm: str, taken_address: str, argv: list[str]
) -> None:
    env = base_env(redis_url, fakellm, CHATQ_WORKER_METRICS_BIND=taken_address)
    proc = Proc("worker-taken-port", argv, env).start()
    code = _exits(proc)
    log = proc.log_text()
    assert code != 0, log
    assert "Traceback" not in log, log
    lines = [line for line in log.splitlines() if taken_address in line]
    assert len(lines) == 1, log
    assert "CHATQ_WORKER_METRICS_BIND" in lines[0]
    assert "in use" in lines[0]
    # It stopped before consuming: Celery never said it was ready.
    assert "ready." not in log


def test_a_free_metrics_port_serves_the_workers_metrics(redis_url: str, fakellm: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    env = base_env(redis_url, fakellm, CHATQ_WORKER_METRICS_BIND=address)
    proc = Proc("worker-free-port", ["worker"], env).start()
    try:
        host, _, port = address.rpartition(":")

        def served() -> bool:
            with socket.create_connection((host, int(port)), timeout=1) as conn:
                conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
                return b"chatq_worker_slots" in conn.makefile("rb").read()

        wait_until(served, 30, "the worker's /metrics")
        assert proc.alive()
    finally:
        proc.stop()


@pytest.mark.parametrize("bind", ["127.0.0.1:notaport", "127.0.0.1:70000"])
def test_a_metrics_address_that_is_no_address_is_one_clear_line_too(
    redis_url: str, fakellm: str, bind: str
) -> None:
    env = base_env(redis_url, fakellm, CHATQ_WORKER_METRICS_BIND=bind)
    proc = Proc("worker-bad-bind", ["worker"], env).start()
    code = _exits(proc)
    log = proc.log_text()
    assert code != 0, log
    assert "Traceback" not in log, log
    assert [line for line in log.splitlines() if bind in line] == [
        f"worker: cannot serve metrics on CHATQ_WORKER_METRICS_BIND={bind}: not a host:port"
    ]
