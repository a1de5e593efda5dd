"""The worker's upstream call goes through the proxy that the environment names (`HTTP_PROXY`,
its credentials included), and around it for a host in `NO_PROXY` (in process: the worker's
own session and attempt).

The upstream's host does not resolve: only a call sent through the proxy can succeed. The
proxy answers every request itself, with a well-formed stream, and notes what it was sent."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis

from chatq.config.settings import Settings
from chatq.jobs.store import Store
from chatq.runtime.logs import Redactor
from scripts.localredis import free_port
from tests.shapes_upstream import STREAMS
from worker.jobs.flusher import DeltaWriter
from worker.jobs.running import Handle
from worker.upstream.attempts import Attempt
from worker.upstream.client import Timeouts, attempt, make_session

UPSTREAM = "http://upstream.invalid/v1"  # .invalid never resolves (RFC 2606)


class Proxy:
    """A forward proxy that answers for the upstream; `seen` holds (request line target,
    Proxy-Authorization) of each request."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.seen.append((self.path, self.headers.get("Proxy-Authorization", "")))
                body = STREAMS["ok"]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Proxy]:
    """A proxy named by HTTP_PROXY (with a user and password), NO_PROXY cleared."""
    server = Proxy()
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://chatq:pa%40ss@127.0.0.1:{server.port}")
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def _call() -> Attempt:
    handle = Handle("job_proxy", "run", time.monotonic() + 10)
    # The text stays in the writer's buffer (it flushes at 10,000 characters): no Redis needed.
    writer = DeltaWriter(Store(redis.Redis(port=free_port()), 60), handle, 10_000)
    session = make_session(Settings(upstream_urls=(UPSTREAM,), worker_concurrency=2))
    body = {"model": "fake"}
    timeouts = Timeouts(2, 5, 5)
    return attempt(
        session, UPSTREAM + "/chat/completions", body, {}, timeouts, handle, writer, Redactor()
    )


def test_the_call_goes_through_the_proxy_of_the_environment(proxy: Proxy) -> None:
    result = _call()
    assert (result.ok, result.status) == (True, 200)
    assert result.completion["choices"][0]["message"]["content"] == "fine"
    credentials = base64.b64encode(b"chatq:pa@ss").decode()
    assert proxy.seen == [(UPSTREAM + "/chat/completions", f"Basic {credentials}")]


def test_a_host_in_no_proxy_is_called_directly(
    proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "upstream.invalid")
    result = _call()
    # Straight to a host that does not resolve: a connection error, retried, not a timeout.
    assert (result.ok, result.retryable, result.outcome) == (False, True, "connection_error")
    assert proxy.seen == []
