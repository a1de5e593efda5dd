"""A webhook receiver for the tests: a loopback HTTP server in a thread that answers each
request to a path with the next answer planned for it (200 once none is left), keeps what it
received, and verifies deliveries as a receiver would (standardwebhooks, the openai SDK).
A planned answer may trickle: its headers never end, a byte at a time, until the client
closes the connection or the receiver is released; the receiver counts the connections open
at each path, now and at most."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import standardwebhooks

from tests.procs import wait_until

HOLD_LIMIT_S = 60.0
TRICKLE_EVERY_S = 0.2


@dataclass(frozen=True)
class Answer:
    """What to answer one request: a status and headers; `hold` keeps the request until the
    receiver is released (then answers the status); `trickle` sends the status line, then a
    header a byte at a time, never ending it, until the client closes the connection (or
    the receiver is released: the answer then ends)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hold: bool = False
    trickle: bool = False


@dataclass
class Received:
    """One request: its path, headers (lower-cased), body, the status answered, when."""

    path: str
    headers: dict[str, str]
    body: str
    status: int
    at_s: float
    answered: bool = False


class Receiver:
    """See the module docstring."""

    def __init__(self) -> None:
        self.plans: dict[str, list[Answer]] = {}
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.open_now: Counter[str] = Counter()
        self.open_max: Counter[str] = Counter()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        """The URL of `path` on this receiver."""
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def plan(self, path: str, *answers: Answer) -> None:
        """Answer the next requests to `path` so, in order."""
        with self.lock:
            self.plans[path] = list(answers)

    def at(self, path: str) -> list[Received]:
        """The requests to `path` so far."""
        with self.lock:
            return [r for r in self.received if r.path == path]

    def accepted(self, path: str) -> list[Received]:
        """The requests to `path` answered 2xx, the answer written whole."""
        return [r for r in self.at(path) if 200 <= r.status < 300 and r.answered]

    def wait_for(self, path: str, count: int, timeout_s: float = 30) -> list[Received]:
        """Wait until `count` requests came to `path`; all of them."""
        wait_until(lambda: len(self.at(path)) >= count, timeout_s, f"{count} at {path}")
        return self.at(path)

    def stop(self) -> None:
        """Release held requests and stop serving."""
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, path: str) -> Answer:
        with self.lock:
            plan = self.plans.get(path) or []
            return plan.pop(0) if plan else Answer()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"receiver": self})

    def _opened(self, got: Received) -> None:
        with self.lock:
            self.received.append(got)
            self.open_now[got.path] += 1
            self.open_max[got.path] = max(self.open_max[got.path], self.open_now[got.path])

    def _closed(self, got: Received) -> None:
        with self.lock:
            self.open_now[got.path] -= 1


class _Handler(BaseHTTPRequestHandler):
    receiver: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        answer = self.receiver._answer(self.path)
        got = Received(
            self.path,
            {k.lower(): v for k, v in self.headers.items()},
            body,
            answer.status,
            time.time(),
        )
        self.receiver._opened(got)
        try:
            if answer.trickle:
                self._trickle(answer, got)
            else:
                self._respond(answer, got)
        finally:
            self.receiver._closed(got)

    def _respond(self, answer: Answer, got: Received) -> None:
        if answer.hold:
            self.receiver.release.wait(HOLD_LIMIT_S)
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.wfile.flush()
        got.answered = True

    def _trickle(self, answer: Answer, got: Received) -> None:
        self.wfile.write(f"HTTP/1.1 {answer.status} Trickle\r\nX-Trickle: ".encode())
        deadline_s = time.monotonic() + HOLD_LIMIT_S
        try:
            while not self.receiver.release.is_set() and time.monotonic() < deadline_s:
                self.wfile.write(b"a")
                self.wfile.flush()
                if _closed_by_client(self.connection, TRICKLE_EVERY_S):
                    return
            self.wfile.write(b"\r\nContent-Length: 0\r\n\r\n")
            self.wfile.flush()
            got.answered = True
        except OSError:
            pass

    def log_message(self, *_: Any) -> None:
        pass


def _closed_by_client(conn: socket.socket, wait_s: float) -> bool:
    """Whether the client closed `conn` within `wait_s` (its request was read whole, so
    anything readable now is the end)."""
    readable, _, _ = select.select([conn], [], [], wait_s)
    return bool(readable) and not conn.recv(1)


# The openai SDK is imported where it is used: tests/conftest.py imports this module, so every
# pytest process (and each session of tests/test_secrets_check.py) would spend a second of CPU
# importing it, whether or not it verifies a delivery.


def unwrap(received: Received, secret: str) -> Any:
    """The openai SDK's verified and parsed event (its `InvalidWebhookSignatureError` if not)."""
    from openai import OpenAI

    client = OpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1")
    return client.webhooks.unwrap(received.body, received.headers, secret=secret)


def verify(received: Received, secret: str) -> Any:
    """Verify a delivery with both libraries; the openai SDK's parsed event."""
    payload = standardwebhooks.Webhook(secret).verify(received.body, received.headers)
    event = unwrap(received, secret)
    assert payload["id"] == received.headers["webhook-id"] == event.id
    return event


def refuse(received: Received, secret: str, match: str) -> None:
    """Both libraries refuse the delivery under `secret`, saying `match`."""
    from openai import InvalidWebhookSignatureError

    with pytest.raises(standardwebhooks.WebhookVerificationError, match=match):
        standardwebhooks.Webhook(secret).verify(received.body, received.headers)
    with pytest.raises(InvalidWebhookSignatureError, match=match):
        unwrap(received, secret)
