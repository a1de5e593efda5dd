"""One webhook attempt over HTTP: signed, through the guarded session, redirects not followed,
all of it (connect, send, the answer's headers) within one deadline, and what came of it.

A socket timeout bounds each read, not the whole: a receiver sending a byte now and then
would never reach it. So each attempt has a `Deadline`, and the connection it holds is shut
when the deadline passes (the delivery pool's supervisor calls `expire`), which ends a
blocked read or write under gevent and under threads alike.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, cast

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import LocationValueError

from chatq import webhooks
from chatq.webhooks import Endpoint, causes, guarded_session, refused
from worker import tracing

USER_AGENT = "chatq-webhooks/1"
DELIVERED = "delivered"
GONE = "gone"
TIMEOUT = "timeout"
INVALID_URL = "invalid_url"
INTERNAL_ERROR = "internal_error"
DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit also takes "²"
_URL_ERRORS = (requests.exceptions.InvalidURL, LocationValueError, UnicodeError)


@dataclass(frozen=True)
class Sent:
    """What an attempt came to: `outcome` is delivered, gone (410), redirect, http_error,
    timeout, connection_error, refused, invalid_url or internal_error; `reason` says why it
    failed; `retry_after_s` is the receiver's wish."""

    outcome: str
    status_code: int | None
    duration_s: float
    retry_after_s: float | None = None
    reason: str | None = None


def retry_after_s(value: str | None, now_s: float) -> float | None:
    """Seconds a `Retry-After` header asks for (ASCII digits or an HTTP date), or None."""
    value = (value or "").strip()
    if DIGITS.fullmatch(value):
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now_s)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


class Deadline:
    """The end of one attempt, `timeout_s` from now; the connection the attempt holds is shut
    by `expire`."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.at_s = time.monotonic() + timeout_s
        self.expired = False
        self._ended = False
        self._held: list[Any] = []
        self._lock = threading.Lock()

    def remaining_s(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.at_s - time.monotonic())

    def hold(self, conn: Any) -> None:
        """The attempt took `conn` from its pool."""
        with self._lock:
            self._held.append(conn)

    def release(self, conn: Any) -> None:
        """The attempt gave `conn` back."""
        with self._lock:
            self._held = [c for c in self._held if c is not conn]

    def end(self) -> bool:
        """The attempt has its answer: expire no more. Whether it came in time."""
        with self._lock:
            self._ended = True
            return not self.expired

    def expire(self) -> None:
        """The deadline passed: shut the connections the attempt holds (again, if called
        again: one it opened since)."""
        with self._lock:
            if self._ended:
                return
            self.expired = True
            sockets = [c.sock for c in self._held if getattr(c, "sock", None) is not None]
        for sock in sockets:
            with contextlib.suppress(OSError):
                # The plain socket's shutdown, under TLS too: it wakes a blocked read at once.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


_attempt = threading.local()  # per greenlet under gevent


class _Watched:
    """Mixed into the session's connection pools: the connection an attempt takes is known to
    the attempt's deadline until given back (the pool reuses connection objects)."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        deadline: Deadline | None = getattr(_attempt, "deadline", None)
        if deadline is not None:
            deadline.hold(conn)
        return conn

    def _put_conn(self, conn: Any) -> None:
        deadline: Deadline | None = getattr(_attempt, "deadline", None)
        if deadline is not None:
            deadline.release(conn)
        super()._put_conn(conn)  # type: ignore[misc]


def session(allow_private: bool, pool_size: int) -> requests.Session:
    """The guarded session (chatq/webhooks/net.py) whose connections deadlines can shut."""
    made = guarded_session(allow_private, pool_size)
    adapter = made.get_adapter("https://")  # the one adapter of both schemes
    manager = cast(HTTPAdapter, adapter).poolmanager
    manager.pool_classes_by_scheme = {
        scheme: type(cls.__name__, (_Watched, cls), {})
        for scheme, cls in manager.pool_classes_by_scheme.items()
    }
    return made


def _outcome(status_code: int) -> tuple[str, str | None]:
    if 200 <= status_code < 300:
        return DELIVERED, None
    if status_code == 410:
        return GONE, "the receiver answered 410 Gone: the endpoint is disabled"
    if 300 <= status_code < 400:
        return "redirect", f"the receiver answered {status_code}; redirects are not followed"
    return "http_error", f"the receiver answered {status_code}"


def _failure(exc: Exception, timeout_s: float) -> tuple[str, str]:
    """The outcome and reason of an attempt that raised `exc`."""
    if isinstance(exc, _URL_ERRORS):
        return INVALID_URL, "the URL cannot be used (its host is not a valid name)"
    if not isinstance(exc, requests.RequestException):
        return INTERNAL_ERROR, f"the attempt failed: {type(exc).__name__}"
    if refused(exc):
        return "refused", "the host resolves only to addresses webhooks may not reach"
    # A read timeout while reading the body surfaces as a ConnectionError.
    if isinstance(exc, requests.Timeout) or "timed out" in str(exc).lower():
        return TIMEOUT, f"no answer within {timeout_s:g} s"
    return "connection_error", f"the connection failed: {type(list(causes(exc))[-1]).__name__}"


def send(
    http: requests.Session,
    endpoint: Endpoint,
    record: dict[str, str],
    now_s: float,
    deadline: Deadline,
) -> Sent:
    """POST the delivery's event to `endpoint`, signed at `now_s` (Redis's clock), within
    `deadline`; never raises."""
    started_ns = time.time_ns()
    sent = _send(http, endpoint, record, now_s, deadline)
    tracing.webhook_sent(endpoint.url, record.get("event", ""), sent, started_ns)
    return sent


def _send(
    http: requests.Session,
    endpoint: Endpoint,
    record: dict[str, str],
    now_s: float,
    deadline: Deadline,
) -> Sent:
    started = time.monotonic()
    _attempt.deadline = deadline
    try:
        return _post(http, endpoint, record, now_s, deadline, started)
    except Exception as exc:
        outcome, reason = _failure(exc, deadline.timeout_s)
        if not deadline.end():
            outcome, reason = TIMEOUT, f"no answer within {deadline.timeout_s:g} s"
        return Sent(outcome, None, time.monotonic() - started, reason=reason)
    finally:
        _attempt.deadline = None


def _post(
    http: requests.Session,
    endpoint: Endpoint,
    record: dict[str, str],
    now_s: float,
    deadline: Deadline,
    started: float,
) -> Sent:
    body = record["body"]
    headers = webhooks.headers(endpoint.signing_secrets(now_s), record["event"], int(now_s), body)
    headers["user-agent"] = USER_AGENT
    left_s = deadline.remaining_s()
    if left_s <= 0:
        raise requests.Timeout("no time left")
    with http.post(
        endpoint.url,
        data=body.encode(),
        headers=headers,
        stream=True,  # the answer's body is not read: its status says it all
        timeout=(left_s, left_s),
        allow_redirects=False,
    ) as response:
        in_time = deadline.end()
        code = response.status_code
        wish = retry_after_s(response.headers.get("Retry-After"), now_s)
    if not in_time:  # cut at the deadline (under threads http.client reads that as the end)
        raise requests.Timeout("deadline")
    outcome, reason = _outcome(code)
    return Sent(outcome, code, time.monotonic() - started, wish, reason)
