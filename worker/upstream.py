"""Calling the upstream chat API: one pooled session per process, one streamed attempt."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection
from urllib3.util import Retry

from chatq.config import Settings
from chatq.logs import Redactor
from worker.running import DeltaWriter, Handle
from worker.sse import CompletionBuilder, sse_data

JSONDict = dict[str, Any]
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
KEEPALIVE_OPTIONS = [
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30),
    (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10),
    (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3),
]


class _KeepaliveAdapter(HTTPAdapter):
    """An HTTPAdapter whose connections use TCP keepalive."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["socket_options"] = HTTPConnection.default_socket_options + KEEPALIVE_OPTIONS
        super().init_poolmanager(*args, **kwargs)


def make_session(settings: Settings) -> requests.Session:
    """A session whose pool holds one connection per concurrent job, per endpoint."""
    adapter = _KeepaliveAdapter(
        pool_connections=max(1, len(settings.upstream_urls)),
        pool_maxsize=settings.worker_concurrency,
        max_retries=0,  # retries are ours: they must see streamed text and the deadline
    )
    session = requests.Session()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


@dataclass(frozen=True)
class Timeouts:
    """Seconds to connect, to the first byte of the answer, and between later chunks."""

    connect_s: float
    first_byte_s: float
    read_s: float


@dataclass
class Attempt:
    """How one upstream call ended."""

    ok: bool = False
    retryable: bool = False
    completion: JSONDict = field(default_factory=dict)
    finish_reason: str = ""
    status: int = 0
    code: str = "upstream_error"
    message: str = ""
    retry_after_s: float | None = None
    first_token_s: float | None = None


def _error_attempt(response: requests.Response, redact: Redactor) -> Attempt:
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    detail = error.get("message") if isinstance(error, dict) else None
    message = f"The upstream answered {response.status_code}"
    if detail:
        message += f": {redact(str(detail))[:500]}"
    code = error.get("code") if isinstance(error, dict) else None
    return Attempt(
        retryable=response.status_code in RETRY_STATUSES,
        status=response.status_code,
        code=code if code == "context_length_exceeded" else "upstream_error",
        message=message,
        retry_after_s=_retry_after_s(response),
    )


def _retry_after_s(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return Retry().parse_retry_after(value)
    except Exception:  # an unreadable Retry-After is ignored, as if absent
        return None


def _set_read_timeout(response: requests.Response, timeout_s: float) -> None:
    """After the first token, allow `timeout_s` between chunks instead of the first-byte wait."""
    sock = getattr(getattr(response.raw, "connection", None), "sock", None)
    if sock is not None:
        sock.settimeout(timeout_s)


def _read_stream(response: requests.Response, writer: DeltaWriter, started: float,
                 read_timeout_s: float) -> Attempt:
    builder = CompletionBuilder()
    first_token_s: float | None = None
    done = False
    for data in sse_data(response.iter_content(chunk_size=None)):
        if done or data.strip() == "[DONE]":
            # Read on to the end of the body: a connection left mid-body cannot be reused.
            done = True
            continue
        chunk = json.loads(data)
        if not isinstance(chunk, dict) or "error" in chunk:
            return Attempt(retryable=True, status=502, message="The upstream sent an error event")
        text = builder.add(chunk)
        if text and first_token_s is None:
            first_token_s = time.monotonic() - started
            _set_read_timeout(response, read_timeout_s)
        if not writer.add(text):
            return Attempt(message="aborted")
    if not (done or builder.finished):
        return Attempt(retryable=True, status=502, message="The upstream stream ended early")
    return Attempt(ok=True, status=200, completion=builder.completion(),
                   finish_reason=builder.finish_reason, first_token_s=first_token_s)


def attempt(
    session: requests.Session,
    url: str,
    body: JSONDict,
    headers: dict[str, str],
    timeouts: Timeouts,
    handle: Handle,
    writer: DeltaWriter,
    redact: Redactor,
) -> Attempt:
    """One streamed call to `url`; never raises for network or protocol faults."""
    started = time.monotonic()
    first_byte_s = min(timeouts.first_byte_s, max(0.01, handle.remaining_s))
    try:
        with session.post(url, json=body, headers=headers, stream=True,
                          timeout=(timeouts.connect_s, first_byte_s)) as resp:
            handle.attach(resp)
            if resp.status_code != 200:
                return _error_attempt(resp, redact)
            return _read_stream(resp, writer, started, timeouts.read_s)
    except (requests.Timeout, TimeoutError):
        return Attempt(retryable=True, status=504, code="upstream_timeout",
                       message="The upstream did not answer in time")
    except (requests.RequestException, OSError, ValueError, UnicodeDecodeError) as exc:
        return Attempt(retryable=True, status=502,
                       message=f"The upstream connection failed ({type(exc).__name__})")
    finally:
        handle.attach(None)
