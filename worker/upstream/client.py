"""Calling the upstream chat API: one pooled session per process, one streamed attempt."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import redis
import requests
from urllib3.response import BaseHTTPResponse

from chatq.config import Settings
from chatq.errors import INTERNAL_ERROR
from chatq.runtime import Redactor
from chatq.topology import BACKEND_ERRORS
from worker.jobs import DeltaWriter, Handle
from worker.upstream.attempts import (
    CONNECTION_ERRORS,
    Attempt,
    JSONDict,
    aborted,
    connection_failed,
    error_attempt,
    invalid_response,
    rate_headers,
)
from worker.upstream.connections import UpstreamSession
from worker.upstream.sse import CompletionBuilder, InvalidChunk, parse_event, sse_data

log = logging.getLogger(__name__)

# The job store's errors: not the upstream's fault; the caller decides what to do with them.
STORE_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, *BACKEND_ERRORS)


def make_session(settings: Settings) -> UpstreamSession:
    """A session whose pools hold one connection per concurrent job, per endpoint."""
    return UpstreamSession(
        settings.upstream_urls, settings.worker_concurrency, settings.upstream_ca_file
    )


@dataclass(frozen=True)
class Timeouts:
    """Seconds to connect, to the first byte of the answer, and between later chunks."""

    connect_s: float
    first_byte_s: float
    read_s: float


def _set_read_timeout(response: BaseHTTPResponse, timeout_s: float) -> None:
    """After the first token, allow `timeout_s` between chunks instead of the first-byte wait."""
    sock = getattr(response.connection, "sock", None)
    if sock is not None:
        sock.settimeout(timeout_s)


def _read_stream(
    response: requests.Response, writer: DeltaWriter, started: float, read_timeout_s: float
) -> Attempt:
    builder = CompletionBuilder()
    first_token_s: float | None = None
    done = False
    seen = 0
    events = sse_data(response.iter_content(chunk_size=None))
    for data in events:
        seen += 1
        if data.strip() == "[DONE]":
            done = True
            break
        chunk = parse_event(data)
        if "error" in chunk:
            return Attempt(retryable=True, status=502, message="The upstream sent an error event")
        text = builder.add(chunk)
        if text and first_token_s is None:
            first_token_s = time.monotonic() - started
            _set_read_timeout(response.raw, read_timeout_s)
        if not writer.add(text):
            return aborted()
    if not seen:
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
        rest=functools.partial(_read_rest, response, events, writer.handle) if done else None,
    )


def _read_rest(response: requests.Response, events: Iterator[str], handle: Handle) -> None:
    """The body after `[DONE]`, read to its end (a connection left mid-body cannot carry the
    next request); then the response is closed and no longer the job's to cut."""
    try:
        with contextlib.suppress(*CONNECTION_ERRORS, InvalidChunk):
            for _ in events:
                pass  # anything after [DONE] is no part of the answer
    finally:
        response.close()
        handle.attach(None)


def _stream_call(
    session: UpstreamSession,
    url: str,
    body: JSONDict,
    headers: Mapping[str, str],
    timeouts: Timeouts,
    handle: Handle,
    writer: DeltaWriter,
    redact: Redactor,
    trace: Mapping[str, str] | None,
) -> Attempt:
    started = time.monotonic()
    first_byte_s = min(timeouts.first_byte_s, max(0.01, handle.remaining_s))
    # `calling`: the connection reports to the handle, so abort cuts even a call that still
    # waits for its first byte.
    with handle.calling():
        timeout_s = (timeouts.connect_s, first_byte_s)
        resp = session.post_streamed(url, _encoded(body), headers, timeout_s, trace)
    result: Attempt | None = None
    try:
        handle.attach(resp.raw)
        if resp.status_code != 200:
            result = error_attempt(resp.raw, redact)
        else:
            result = _read_stream(resp, writer, started, timeouts.read_s)
        result.rate_headers = rate_headers(resp.raw)
        result.sent_at = started
        return result
    finally:
        if result is None or result.rest is None:
            # A body read to its end has put its connection back in the pool already; one
            # left unread is closed, since it cannot carry the next request.
            resp.close()
            handle.attach(None)


def _encoded(body: JSONDict) -> bytes:
    return json.dumps(body, ensure_ascii=False, allow_nan=False).encode()


def attempt(
    session: UpstreamSession,
    url: str,
    body: JSONDict,
    headers: Mapping[str, str],
    timeouts: Timeouts,
    handle: Handle,
    writer: DeltaWriter,
    redact: Redactor,
    trace: Mapping[str, str] | None = None,
) -> Attempt:
    """One streamed call to `url`: how it ended. Raises only the job store's errors. `trace`:
    this attempt's own trace headers (`traceparent`), sent beside `headers`."""
    try:
        return _stream_call(session, url, body, headers, timeouts, handle, writer, redact, trace)
    except STORE_ERRORS:
        raise
    except InvalidChunk as exc:
        return invalid_response(exc, handle)
    except CONNECTION_ERRORS as exc:
        return connection_failed(exc, handle)
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
