"""A stopping web closes idle keep-alive connections at once: a client that keeps its
connection open between requests (every HTTP client pool, every load balancer) does not hold
the process for the whole grace period."""

from __future__ import annotations

import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import psutil
import requests

from tests.procs import Proc, base_env, start_web

GRACE_S = 60


def _one_request(conn: socket.socket) -> bytes:
    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: chatq\r\n\r\n")
    answer = b""
    while not answer.endswith(b'{"status":"ok"}'):
        answer += conn.recv(4096)
    return answer


def test_sigterm_closes_an_idle_keep_alive_connection_and_the_web_exits(
    redis_url: str, fakellm: str
) -> None:
    web, url = start_web(base_env(redis_url, fakellm, CHATQ_GRACEFUL_TIMEOUT=str(GRACE_S)))
    try:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=GRACE_S / 4) as conn:
            assert _one_request(conn).startswith(b"HTTP/1.1 200")
            web.signal(signal.SIGTERM)
            # Closed with nothing sent: no error answer to a request never made.
            assert conn.recv(4096) == b""
        assert web.process is not None
        # Before the fix the idle connection held the process until GRACE_S ran out.
        assert web.process.wait(GRACE_S / 4) == 0
    except (TimeoutError, subprocess.TimeoutExpired):
        raise AssertionError("the web still runs, held by an idle connection") from None
    finally:
        web.stop()
    assert "graceful timeout" not in web.log_text()


def _metrics_dir_of(web: Proc) -> Path:
    """The metrics folder the web made for itself: the one holding its worker's files."""
    workers = {child.pid for child in psutil.Process(web.pid).children()}
    for folder in Path(tempfile.gettempdir()).glob("chatq-metrics-*"):
        if any(int(f.stem.rsplit("_", 1)[-1]) in workers for f in folder.glob("*_*.db")):
            return folder
    raise AssertionError("no metrics folder holds the web worker's files")


def test_a_web_removes_the_metrics_folder_it_made_when_it_stops(
    redis_url: str, fakellm: str
) -> None:
    web, url = start_web(base_env(redis_url, fakellm))
    try:
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 200
        folder = _metrics_dir_of(web)
        web.signal(signal.SIGTERM)
        assert web.process is not None and web.process.wait(GRACE_S / 4) == 0
    finally:
        web.stop()
    assert not folder.exists()
