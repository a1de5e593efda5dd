"""Counting a prompt's tokens does not stop an event loop: a web answers other requests while
it counts a large prompt, and a batch line that waits for its key's tokens is counted once."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, wait_until

# A prompt that takes tiktoken a while: one run of a letter (no spaces for the pre-tokenizer
# to split at) is the slowest text to encode, about a second for these 2 MiB on 2 cores.
LARGE_PROMPT_CHARS = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def web(fakellm: str) -> Iterator[Stack]:
    """One web process (one gevent loop), no worker, on a Redis of its own."""
    server = LocalRedis().start()
    stack = start_stack(
        server.url,
        fakellm,
        workers=0,
        CHATQ_WEB_WORKERS="1",
        CHATQ_MAX_BODY_BYTES=str(LARGE_PROMPT_CHARS + 4096),
    )
    yield stack
    stack.stop()
    server.stop()


def _queues(local_port: int, remote_port: int) -> tuple[int, int] | None:
    """(bytes not yet sent, bytes not yet read) of the loopback TCP socket from `local_port`
    to `remote_port`, as /proc/net/tcp shows it."""
    wanted = (f"0100007F:{local_port:04X}", f"0100007F:{remote_port:04X}")
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (fields[1], fields[2]) == wanted:
            tx, rx = fields[4].split(":")
            return int(tx, 16), int(rx, 16)
    return None


def _post_raw(url: str, path: str, body: bytes) -> tuple[socket.socket, int, int]:
    """Send a whole POST on a socket of its own; (the socket, its port, the server's port)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ALICE_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock, sock.getsockname()[1], int(port)


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_the_web_answers_healthz_while_it_counts_a_large_prompt(web: Stack) -> None:
    body = {"model": "fake", "messages": [{"role": "user", "content": "a" * LARGE_PROMPT_CHARS}]}
    sock, port, web_port = _post_raw(web.url, "/v1/jobs", json.dumps(body).encode())
    order: list[str] = []
    answer: list[bytes] = []

    def submit_returns() -> None:
        answer.append(_read_all(sock))
        order.append("submit")

    reader = threading.Thread(target=submit_returns)
    reader.start()
    # Every byte of the body is with the web (its socket holds none unread): it is counting.
    wait_until(lambda: _queues(port, web_port) == (0, 0), 30, "the body sent")
    wait_until(lambda: (_queues(web_port, port) or (1, 1))[1] == 0, 30, "the body read")
    assert requests.get(web.url + "/healthz", timeout=30).ok
    order.append("healthz")
    reader.join(60)
    sock.close()
    assert answer and answer[0].startswith(b"HTTP/1.1 202"), answer[:1]
    assert order == ["healthz", "submit"]
