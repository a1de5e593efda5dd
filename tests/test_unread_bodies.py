"""A body the web will not read is not drained on its event loop (web/server/unread.py), and an
accepted upload lets the process's other requests run while it streams (web/batches/upload.py):
a real `python -m web`, gunicorn and gevent, sent bodies faster than it can read them."""

from __future__ import annotations

import socket
import threading

import pytest
import requests

from tests.conftest import Stack
from tests.procs import ALICE_KEY

BIG_BYTES = 100 * 1024 * 1024
SOCKET_TIMEOUT_S = 30


@pytest.fixture
def web(stack: Stack) -> str:
    """The session stack's web: these tests need one of the default settings, and leave it
    as they found it."""
    return stack.url


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S)


def _read_response(conn: socket.socket) -> bytes:
    """One response (Content-Length framed), without reading past it."""
    head = b""
    while b"\r\n\r\n" not in head:
        part = conn.recv(1)
        assert part, f"closed before the response ended: {head!r}"
        head += part
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    body = b""
    while len(body) < length:
        body += conn.recv(length - len(body))
    return head + body


def _closed(conn: socket.socket) -> bool:
    """Whether the server has closed `conn` (waits for it, or for the socket's timeout)."""
    try:
        return conn.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


AUTH = f"Authorization: Bearer {ALICE_KEY}\r\n"
REFUSED = [
    pytest.param("POST /v1/jobs", "", b" 401 ", id="no key"),
    pytest.param("POST /healthz", "", b" 405 ", id="method not allowed"),
    pytest.param("POST /v1/jobs", AUTH, b" 413 ", id="too large"),
]


@pytest.mark.parametrize(("request_line", "auth", "status"), REFUSED)
def test_a_large_body_that_is_refused_closes_its_connection_unread(
    web: str, request_line: str, auth: str, status: bytes
) -> None:
    with _connect(web) as conn:
        conn.sendall(
            f"{request_line} HTTP/1.1\r\nHost: chatq\r\n{auth}"
            f"Content-Type: application/json\r\nContent-Length: {BIG_BYTES}\r\n\r\n".encode()
            + b"{" * 65536
        )
        answer = _read_response(conn)
        assert status in answer.split(b"\r\n")[0]
        assert b"\r\nconnection: close\r\n" in answer.lower()
        # Nothing more is sent: the web does not wait for the other ~100 MB (before the fix it
        # did, reading them on its loop once they came, and kept the connection).
        assert _closed(conn)


def test_a_refused_chunked_body_closes_its_connection_unread(web: str) -> None:
    with _connect(web) as conn:
        conn.sendall(
            b"POST /v1/jobs HTTP/1.1\r\nHost: chatq\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"10000\r\n"
            + b"{" * 65536
            + b"\r\n"
        )
        answer = _read_response(conn)
        assert b" 401 " in answer.split(b"\r\n")[0]
        assert _closed(conn)


def test_a_small_refused_body_keeps_its_connection(web: str) -> None:
    with _connect(web) as conn:
        for _ in range(2):
            conn.sendall(
                b"POST /v1/jobs HTTP/1.1\r\nHost: chatq\r\nContent-Length: 1000\r\n\r\n"
                + b"{" * 1000
            )
            answer = _read_response(conn)
            assert b" 401 " in answer.split(b"\r\n")[0]
            assert b"\r\nconnection: keep-alive\r\n" in answer.lower()


class _Upload(threading.Thread):
    """POST /v1/files of `size_bytes` (one line), sent as fast as the web takes it."""

    BOUNDARY = "chatq-test-boundary"
    PIECE = b"x" * (1024 * 1024)

    def __init__(self, url: str, size_bytes: int) -> None:
        super().__init__(daemon=True)
        self.url, self.size_bytes = url, size_bytes
        self.sent_bytes = 0
        self.answer = b""

    def _parts(self) -> tuple[bytes, bytes]:
        b = self.BOUNDARY
        head = (
            f'--{b}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        return head, f"\r\n--{b}--\r\n".encode()

    def run(self) -> None:
        head, tail = self._parts()
        with _connect(self.url) as conn:
            conn.sendall(
                f"POST /v1/files HTTP/1.1\r\nHost: chatq\r\nAuthorization: Bearer {ALICE_KEY}\r\n"
                f"Content-Type: multipart/form-data; boundary={self.BOUNDARY}\r\n"
                f"Content-Length: {len(head) + self.size_bytes + len(tail)}\r\n\r\n".encode()
                + head
            )
            while self.sent_bytes < self.size_bytes:
                piece = self.PIECE[: self.size_bytes - self.sent_bytes]
                conn.sendall(piece)
                self.sent_bytes += len(piece)
            conn.sendall(tail)
            self.answer = _read_response(conn)


def test_health_is_answered_while_an_upload_still_streams(web: str) -> None:
    upload = _Upload(web, 160 * 1024 * 1024)
    upload.start()
    # Past what the socket buffers hold: the web is reading the upload.
    while upload.sent_bytes < 16 * 1024 * 1024:
        assert upload.is_alive(), "the upload ended early"
        upload.join(0.01)
    assert requests.get(f"{web}/healthz", timeout=SOCKET_TIMEOUT_S).ok
    sent_when_answered = upload.sent_bytes
    upload.join(SOCKET_TIMEOUT_S)
    assert b" 200 " in upload.answer.split(b"\r\n")[0]
    # Before the fix the upload's greenlet read all it was sent without a switch: /healthz
    # waited until the whole body had been sent and written.
    assert sent_when_answered < upload.size_bytes
    file_id = upload.answer.split(b'"id":"')[1].split(b'"')[0].decode()
    auth = {"Authorization": f"Bearer {ALICE_KEY}"}
    assert requests.delete(f"{web}/v1/files/{file_id}", headers=auth, timeout=10).ok
