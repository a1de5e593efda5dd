"""The worker's session retries only what belongs to the transport: a connection that could
not be made is tried once more at once, then the attempt ends for the job's own policy; it
keeps no cookie from one call to the next; a request leaves in one send; and an answer ends at
its `[DONE]`, its body's end read afterwards (in process: the worker's own session and
attempt)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis

from chatq.jobs.store import Store
from chatq.runtime.logs import Redactor
from scripts.localredis import free_port
from tests.shapes_upstream import STREAMS
from worker.jobs.flusher import DeltaWriter
from worker.jobs.running import Handle
from worker.upstream.attempts import Attempt
from worker.upstream.client import Timeouts, attempt
from worker.upstream.connections import ReportingConnection, UpstreamSession

CONNECT_S = 0.3


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose listener never accepts and whose backlog is full: a connect times out."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    waiting = []
    for _ in range(3):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
        waiting.append(client)
    yield port
    for client in waiting:
        client.close()
    listener.close()


@pytest.fixture
def cookie_upstream() -> Iterator[tuple[str, list[str]]]:
    """An upstream that sets a cookie on every answer; (its URL, the Cookie header of each
    request, empty when none came)."""
    cookies: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            cookies.append(self.headers.get("Cookie", ""))
            body = STREAMS["ok"]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Set-Cookie", "tenant=first; Path=/")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", cookies
    server.shutdown()
    server.server_close()


@pytest.fixture
def late_end_upstream() -> Iterator[tuple[str, threading.Event, list[int], list[int]]]:
    """An upstream whose answer's body (chunked) ends only once the test sets the event (or
    after 10 s), well after its last event ([DONE]); (its URL, the event, the client port of
    each call, and of each body ended)."""
    release = threading.Event()
    ports: list[int] = []
    ended: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            ports.append(self.client_address[1])
            body = STREAMS["ok"]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(body), body))
            self.wfile.flush()
            release.wait(10)
            self.wfile.write(b"0\r\n\r\n")
            ended.append(self.client_address[1])

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", release, ports, ended
    release.set()
    server.shutdown()
    server.server_close()


def _call(session: UpstreamSession, url: str, connect_s: float = CONNECT_S) -> Attempt:
    handle = Handle("job_transport", "run", time.monotonic() + 30)
    # The text stays in the writer's buffer (it flushes at 10,000 characters): no Redis needed.
    writer = DeltaWriter(Store(redis.Redis(port=free_port()), 60), handle, 10_000)
    timeouts = Timeouts(connect_s, 5, 5)
    return attempt(
        session, url + "/chat/completions", {"model": "x"}, {}, timeouts, handle, writer, Redactor()
    )


def test_a_connect_that_times_out_is_tried_once_more_then_is_a_timeout(full_backlog: int) -> None:
    url = f"http://127.0.0.1:{full_backlog}/v1"
    started = time.monotonic()
    result = _call(UpstreamSession((url,), maxsize=2), url)
    # Two connects, each waiting its whole timeout; then the job's policy decides.
    assert time.monotonic() - started >= 2 * CONNECT_S
    assert (result.ok, result.retryable, result.outcome) == (False, True, "timeout")


def test_no_cookie_goes_from_one_call_to_the_next(cookie_upstream: tuple[str, list[str]]) -> None:
    url, cookies = cookie_upstream
    session = UpstreamSession((url,), maxsize=2)
    assert all(_call(session, url, connect_s=5).ok for _ in range(2))
    assert cookies == ["", ""] and not session.cookies


def test_an_answer_ends_at_its_done_and_its_connection_carries_the_next_call(
    late_end_upstream: tuple[str, threading.Event, list[int], list[int]],
) -> None:
    url, release, ports, ended = late_end_upstream
    session = UpstreamSession((url,), maxsize=2)
    first = _call(session, url, connect_s=5)
    # Whole before the body's end: the job's end waits for none of it.
    assert not ended
    assert first.ok and first.completion["choices"][0]["message"]["content"] == "fine"
    release.set()
    first.read_rest()  # to the body's end: the connection goes back to the pool
    second = _call(session, url, connect_s=5)
    second.read_rest()
    assert second.ok and len(ports) == 2 and ports[0] == ports[1]


class _Recording:
    """A socket that keeps what each sendall sent."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(bytes(data))
        self.sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


def test_a_request_s_header_block_leaves_with_its_body() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        connection = ReportingConnection("127.0.0.1", server.getsockname()[1])
        connection.connect()
        recording = _Recording(connection.sock)
        connection.sock = recording
        body = b'{"model": "x"}'
        connection.request("POST", "/v1/chat/completions", body=body, headers={"A": "b"})
        connection.close()
    [sent] = recording.sent
    assert sent.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and sent.endswith(body)
