"""How an upstream call ended (`Attempt`), and the readings of a failed one: its error body,
Retry-After, rate-limit headers, a timeout told from a broken connection."""

from __future__ import annotations

import http.client
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import urllib3.exceptions
from urllib3.response import BaseHTTPResponse
from urllib3.util import Retry

from chatq.admission import parse_number
from chatq.errors import UPSTREAM_INVALID_RESPONSE, UPSTREAM_TIMEOUT
from chatq.runtime import Redactor
from worker.jobs import Handle
from worker.upstream.sse import InvalidChunk

log = logging.getLogger(__name__)

JSONDict = dict[str, Any]
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# What a failed connection to the upstream raises (urllib3 wraps most of it, and requests wraps
# urllib3's errors in its RequestException, an OSError, the urllib3 error its first argument).
CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    OSError,
)
TIMEOUT_ERRORS: tuple[type[Exception], ...] = (urllib3.exceptions.TimeoutError, TimeoutError)
# How much of a failed call's body is read for its error message.
ERROR_BODY_BYTES = 64 * 1024


@dataclass
class Attempt:
    """How one upstream call ended.

    `status` is the HTTP status the upstream answered (0 if it did not); `outcome` names the
    ending when no status tells it (timeout, connection_error, invalid_response, …).
    """

    ok: bool = False
    retryable: bool = False
    completion: JSONDict = field(default_factory=dict)
    finish_reason: str = ""
    status: int = 0
    code: str = "upstream_error"
    message: str = ""
    retry_after_s: float | None = None
    first_token_s: float | None = None
    outcome: str = ""
    # The answer's rate-limit headers (x-ratelimit-*, lower-case names), and when its
    # request was sent (time.monotonic()): what pacing learns from.
    rate_headers: dict[str, str] = field(default_factory=dict)
    sent_at: float = 0.0
    # What the answer sends after its `[DONE]` (the end of its body), left unread so that the
    # job's end waits for none of it (worker/upstream/client.py): read by `read_rest`.
    rest: Callable[[], None] | None = None

    @property
    def label(self) -> str:
        """The metrics label of this ending: the upstream's HTTP status, else `outcome`."""
        return self.outcome or str(self.status or "connection_error")

    def read_rest(self) -> None:
        """Read the rest of the answer (once), so that its connection goes back to the pool,
        and close it: called once the job's end is recorded."""
        rest, self.rest = self.rest, None
        if rest is not None:
            rest()


def timed_out(exc: BaseException) -> bool:
    """Whether `exc` is or wraps a timeout (a wrapped error is the first argument, or the
    exception it was raised from)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, urllib3.exceptions.NewConnectionError):
            return False  # refused or unreachable: urllib3 files it under its TimeoutError
        if isinstance(current, TIMEOUT_ERRORS):
            return True
        seen.add(id(current))
        wrapped = current.args[0] if current.args else None
        current = (
            wrapped
            if isinstance(wrapped, BaseException)
            else (current.__cause__ or current.__context__)
        )
    return False


def error_attempt(response: BaseHTTPResponse, redact: Redactor) -> Attempt:
    try:
        body = response.read(ERROR_BODY_BYTES, decode_content=True)
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    detail = error.get("message") if isinstance(error, dict) else None
    message = f"The upstream answered {response.status}"
    if detail:
        message += f": {redact(str(detail))[:500]}"
    code = error.get("code") if isinstance(error, dict) else None
    return Attempt(
        retryable=response.status in RETRY_STATUSES,
        status=response.status,
        code=code if code == "context_length_exceeded" else "upstream_error",
        message=message,
        retry_after_s=retry_after_s(response),
    )


def retry_after_s(response: BaseHTTPResponse) -> float | None:
    # retry-after-ms (OpenAI's, and what its SDKs read first) is finer than whole seconds.
    millis = response.headers.get("retry-after-ms")
    number = None if millis is None else parse_number(millis)
    if number is not None:
        return number / 1000
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return Retry().parse_retry_after(value)
    except Exception:  # an unreadable Retry-After is ignored, as if absent
        return None


def rate_headers(response: BaseHTTPResponse) -> dict[str, str]:
    return {
        name.lower(): value
        for name, value in response.headers.items()
        if name.lower().startswith("x-ratelimit-")
    }


def aborted() -> Attempt:
    return Attempt(message="aborted", outcome="aborted")


def invalid_response(exc: InvalidChunk, handle: Handle) -> Attempt:
    if handle.abort_reason:  # we cut the stream ourselves
        return aborted()
    log.warning(
        "job %s: the upstream's answer is invalid: %s",
        handle.job_id,
        exc,
        extra={"job_id": handle.job_id},
    )
    # The same request would get the same answer: not retried.
    return Attempt(
        code=UPSTREAM_INVALID_RESPONSE,
        outcome="invalid_response",
        message=f"The upstream sent an invalid response: {exc}",
    )


def connection_failed(exc: Exception, handle: Handle) -> Attempt:
    if handle.abort_reason:  # we cut it ourselves
        return aborted()
    if timed_out(exc):
        return Attempt(
            retryable=True,
            code=UPSTREAM_TIMEOUT,
            outcome="timeout",
            message="The upstream did not answer in time",
        )
    return Attempt(
        retryable=True,
        outcome="connection_error",
        message=f"The upstream connection failed ({type(exc).__name__})",
    )
