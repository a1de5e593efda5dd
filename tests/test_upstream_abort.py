"""Handle.abort cuts the worker's upstream call while it still waits for the answer's first
byte, over plain HTTP and over TLS (in process: the worker's own session and attempt, against
a server that reads the request and never answers)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import trustme

from chatq.config.settings import Settings
from chatq.jobs.store import Store
from chatq.runtime.logs import Redactor
from scripts.localredis import free_port
from worker.jobs.flusher import DeltaWriter
from worker.jobs.running import Handle
from worker.upstream.attempts import Attempt
from worker.upstream.client import Timeouts, attempt, make_session

# Far longer than the test waits: a call that is not cut outlives the test.
FIRST_BYTE_S = 600.0


class SilentUpstream:
    """Accepts one connection, reads a request's head, never answers; notes what it saw."""

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.context = context
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with self.listener:
            raw, _ = self.listener.accept()
            conn = self.context.wrap_socket(raw, server_side=True) if self.context else raw
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                self.received.set()
                # Until the client's side closes (TLS may say so with an error: no close_notify).
                with contextlib.suppress(OSError):
                    while conn.recv(65536):
                        pass
                self.closed.set()


@dataclass
class Upstream:
    """A silent upstream, and how to reach it."""

    server: SilentUpstream
    url: str
    ca_path: str


@pytest.fixture(params=["http", "https"])
def upstream(request: pytest.FixtureRequest, tmp_path: Path) -> Upstream:
    """A silent upstream over plain HTTP or TLS (its certificate from a throwaway CA)."""
    if request.param == "http":
        server = SilentUpstream(None)
        return Upstream(server, f"http://127.0.0.1:{server.port}/v1", "")
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca_path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    server = SilentUpstream(context)
    return Upstream(server, f"https://127.0.0.1:{server.port}/v1", str(ca_path))


def _writer(handle: Handle) -> DeltaWriter:
    # Nothing is ever written: the call gets no text.
    return DeltaWriter(Store(redis.Redis(port=free_port()), 60), handle, 1)


def test_abort_cuts_a_call_waiting_for_its_first_byte(upstream: Upstream) -> None:
    settings = Settings(
        upstream_urls=(upstream.url,), worker_concurrency=2, upstream_ca_file=upstream.ca_path
    )
    session = make_session(settings)
    handle = Handle("job_abort", "run", time.monotonic() + FIRST_BYTE_S)
    ended: list[Attempt] = []

    def call() -> None:
        ended.append(
            attempt(
                session,
                upstream.url + "/chat/completions",
                {"model": "x"},
                {},
                Timeouts(10, FIRST_BYTE_S, FIRST_BYTE_S),
                handle,
                _writer(handle),
                Redactor(),
            )
        )

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert upstream.server.received.wait(30), "the request never reached the upstream"
    handle.abort("cancelled")
    # The upstream sees the connection closed, and the call ends as aborted.
    assert upstream.server.closed.wait(30), "the call still waits for its first byte"
    caller.join(30)
    assert not caller.is_alive()
    (result,) = ended
    assert (result.outcome, result.ok, result.retryable) == ("aborted", False, False)
