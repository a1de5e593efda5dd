"""A request whose headers do not arrive within CHATQ_HEADER_TIMEOUT is closed
(web/server/gunicorn_worker.py), while a keep-alive connection waiting for its next request is kept
for CHATQ_KEEPALIVE."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.procs import base_env, start_web

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: chatq\r\n\r\n"
# Far longer than the header timeout under test: a socket still open then was not closed.
SOCKET_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def web(redis_url: str, fakellm: str) -> Iterator[tuple[str, int]]:
    env = base_env(redis_url, fakellm, CHATQ_HEADER_TIMEOUT="1", CHATQ_KEEPALIVE="75")
    proc, url = start_web(env)
    host, port = url.removeprefix("http://").split(":")
    yield host, int(port)
    proc.stop()


def _connect(web: tuple[str, int]) -> socket.socket:
    return socket.create_connection(web, timeout=SOCKET_TIMEOUT_S)


def _healthz(conn: socket.socket, *parts: bytes) -> bytes:
    for part in parts or (HEALTHZ,):
        conn.sendall(part)
    answer = b""
    while not answer.endswith(b'{"status":"ok"}'):
        got = conn.recv(4096)
        assert got, f"closed before the answer ended: {answer!r}"
        answer += got
    return answer


def _closed_with_nothing_sent(conn: socket.socket) -> bool:
    try:
        return conn.recv(4096) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_request_line_that_never_ends_is_closed(web: tuple[str, int]) -> None:
    with _connect(web) as idle, _connect(web) as half:
        assert _healthz(idle).startswith(b"HTTP/1.1 200")
        half.sendall(HEALTHZ[:10])
        # Before the fix it was held for CHATQ_KEEPALIVE (75 s).
        assert _closed_with_nothing_sent(half)
        # The idle keep-alive connection outlived the header timeout and is still served, its
        # next request sent in two parts.
        assert _healthz(idle, HEALTHZ[:10], HEALTHZ[10:]).startswith(b"HTTP/1.1 200")


def test_a_connection_that_sends_nothing_is_closed(web: tuple[str, int]) -> None:
    with _connect(web) as silent:
        assert _closed_with_nothing_sent(silent)


def test_a_keep_alive_connection_whose_next_headers_stop_is_closed(web: tuple[str, int]) -> None:
    with _connect(web) as conn:
        assert _healthz(conn).startswith(b"HTTP/1.1 200")
        conn.sendall(HEALTHZ[:-2])  # all but the blank line that ends the headers
        assert _closed_with_nothing_sent(conn)
