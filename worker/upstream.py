"""Calling the upstream chat API: one pooled session per process, one streamed attempt."""

from __future__ import annotations

import http.client
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import redis
import requests
import urllib3.exceptions
from urllib3.util import Retry

from chatq.config import Settings
from chatq.errors import INTERNAL_ERROR, UPSTREAM_INVALID_RESPONSE, UPSTREAM_TIMEOUT
from chatq.logs import Redactor
from chatq.redis_conn import BACKEND_ERRORS
from worker.flusher import DeltaWriter
from worker.running import Handle
from worker.sse import CompletionBuilder, InvalidChunk, parse_event, sse_data
from worker.upstream_conn import UpstreamAdapter

log = logging.getLogger(__name__)

JSONDict = dict[str, Any]
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# The job store's errors: not the upstream's fault; the caller decides what to do with them.
STORE_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, *BACKEND_ERRORS)
# What a failed connection to the upstream raises (requests wraps most of it).
CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    requests.RequestException,
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    OSError,
)
TIMEOUT_ERRORS: tuple[type[Exception], ...] = (
    requests.Timeout,
    urllib3.exceptions.TimeoutError,
    TimeoutError,
)


def make_session(settings: Settings) -> requests.Session:
    """A session whose pool holds one connection per concurrent job, per endpoint."""
    adapter = UpstreamAdapter(
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

    @property
    def label(self) -> str:
        """The metrics label of this ending: the upstream's HTTP status, else `outcome`."""
        return self.outcome or str(self.status or "connection_error")


def timed_out(exc: BaseException) -> bool:
    """Whether `exc` is or wraps a timeout (requests files a read timeout mid-body as a
    ConnectionError around urllib3's ReadTimeoutError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
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
    # retry-after-ms (OpenAI's, and what its SDKs read first) is finer than whole seconds.
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
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


def _read_stream(
    response: requests.Response, writer: DeltaWriter, started: float, read_timeout_s: float
) -> Attempt:
    builder = CompletionBuilder()
    first_token_s: float | None = None
    done = False
    events = 0
    for data in sse_data(response.iter_content(chunk_size=None)):
        events += 1
        if done or data.strip() == "[DONE]":
            # Read on to the end of the body: a connection left mid-body cannot be reused.
            done = True
            continue
        chunk = parse_event(data)
        if "error" in chunk:
            return Attempt(retryable=True, status=502, message="The upstream sent an error event")
        text = builder.add(chunk)
        if text and first_token_s is None:
            first_token_s = time.monotonic() - started
            _set_read_timeout(response, read_timeout_s)
        if not writer.add(text):
            return _aborted()
    if not events:
        # A 200 whose body is whole but holds no event: HTML, or a JSON answer to our stream.
        raise InvalidChunk("the answer holds no Server-Sent Events")
    if not (done or builder.finished):
        return Attempt(
            retryable=True, outcome="connection_error", message="The upstream stream ended early"
        )
    return Attempt(
        ok=True,
        status=200,
        completion=builder.completion(),
        finish_reason=builder.finish_reason,
        first_token_s=first_token_s,
    )


def _stream_call(
    session: requests.Session,
    url: str,
    body: JSONDict,
    headers: dict[str, str],
    timeouts: Timeouts,
    handle: Handle,
    writer: DeltaWriter,
    redact: Redactor,
) -> Attempt:
    started = time.monotonic()
    first_byte_s = min(timeouts.first_byte_s, max(0.01, handle.remaining_s))
    try:
        # `calling`: the connection reports to the handle, so abort cuts even a call that
        # still waits for its first byte.
        with (
            handle.calling(),
            session.post(
                url,
                json=body,
                headers=headers,
                stream=True,
                timeout=(timeouts.connect_s, first_byte_s),
            ) as resp,
        ):
            handle.attach(resp)
            if resp.status_code != 200:
                result = _error_attempt(resp, redact)
            else:
                result = _read_stream(resp, writer, started, timeouts.read_s)
            result.rate_headers = _rate_headers(resp)
            result.sent_at = started
            return result
    finally:
        handle.attach(None)


def _rate_headers(response: requests.Response) -> dict[str, str]:
    return {
        name.lower(): value
        for name, value in response.headers.items()
        if name.lower().startswith("x-ratelimit-")
    }


def _aborted() -> Attempt:
    return Attempt(message="aborted", outcome="aborted")


def _invalid_response(exc: InvalidChunk, handle: Handle) -> Attempt:
    if handle.abort_reason:  # we cut the stream ourselves
        return _aborted()
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


def _connection_failed(exc: Exception, handle: Handle) -> Attempt:
    if handle.abort_reason:  # we cut it ourselves
        return _aborted()
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
    """One streamed call to `url`: how it ended. Raises only the job store's errors."""
    try:
        return _stream_call(session, url, body, headers, timeouts, handle, writer, redact)
    except STORE_ERRORS:
        raise
    except InvalidChunk as exc:
        return _invalid_response(exc, handle)
    except CONNECTION_ERRORS as exc:
        return _connection_failed(exc, handle)
    except Exception:
        log.exception(
            "job %s: the attempt failed unexpectedly",
            handle.job_id,
            extra={"job_id": handle.job_id},
        )
        return Attempt(
            code=INTERNAL_ERROR,
            outcome="internal_error",
            message="The worker failed while calling the upstream; see its log",
        )
