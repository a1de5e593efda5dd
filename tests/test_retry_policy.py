"""The failure policy, without processes: the HTTP status of a failed job, the worker's
backoff between attempts, and how an attempt that raises ends."""

from __future__ import annotations

import logging
import random
import time

import pytest
import redis
import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)

from chatq.config.settings import Settings
from chatq.errors import failed_job_status
from chatq.jobs.store import Store
from chatq.runtime.logs import Redactor
from scripts.localredis import free_port
from worker.jobs.flusher import DeltaWriter
from worker.jobs.running import Handle
from worker.run.runner import BACKOFF_CAP_S, _backoff_s
from worker.upstream.attempts import Attempt, retry_after_s, timed_out
from worker.upstream.client import Timeouts, attempt
from worker.upstream.connections import UpstreamSession

# (error code, status the upstream answered or 0) -> status the client gets.
FAILED_JOB_STATUS = [
    ("upstream_timeout", 0, 504),
    ("upstream_error", 504, 504),
    ("upstream_error", 408, 504),
    ("upstream_error", 0, 502),  # connection refused, reset or cut
    ("upstream_error", 500, 502),
    ("upstream_error", 503, 502),
    ("upstream_error", 401, 502),  # our credentials refused: not the client's fault
    ("upstream_error", 403, 502),
    ("upstream_error", 409, 502),
    ("upstream_error", 400, 400),
    ("upstream_error", 404, 404),
    ("upstream_error", 413, 413),
    ("upstream_error", 422, 422),
    ("upstream_error", 429, 429),
    ("context_length_exceeded", 400, 400),
    ("context_length_exceeded", 0, 422),
    ("upstream_invalid_response", 0, 502),
    ("internal_error", 0, 502),
    ("worker_lost", 0, 502),
    ("invalid_request", 0, 400),
    ("some_future_code", 0, 502),
    (None, 0, 502),
]


@pytest.mark.parametrize("code,upstream_status,status", FAILED_JOB_STATUS)
def test_failed_job_status(code: str | None, upstream_status: int, status: int) -> None:
    assert failed_job_status(code, upstream_status) == status


SETTINGS = Settings(retry_base_s=0.5, retry_after_max_s=30.0)


def _draws(attempt_no: int, n: int = 2000, seed: int = 7) -> list[float]:
    random.seed(seed)
    return [_backoff_s(SETTINGS, attempt_no, Attempt()) for _ in range(n)]


@pytest.mark.parametrize("attempt_no", range(8))
def test_backoff_is_full_jitter_up_to_the_exponential_ceiling(attempt_no: int) -> None:
    ceiling_s = min(BACKOFF_CAP_S, 0.5 * 2**attempt_no)
    draws = _draws(attempt_no)
    assert all(0 <= d <= ceiling_s for d in draws)
    # Full jitter: spread over the whole range, not bunched near the ceiling.
    assert min(draws) < 0.05 * ceiling_s and max(draws) > 0.95 * ceiling_s
    assert sum(d < ceiling_s / 2 for d in draws) > 0.4 * len(draws)


def test_backoff_never_exceeds_its_cap() -> None:
    draws = _draws(40)
    assert max(draws) <= BACKOFF_CAP_S and max(draws) > 0.95 * BACKOFF_CAP_S


def test_backoff_draws_differ_between_jobs() -> None:
    assert len(set(_draws(3, n=50))) == 50


@pytest.mark.parametrize(
    "headers,seconds",
    [
        ({"Retry-After": "2"}, 2.0),
        ({"Retry-After": "1", "retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "3", "retry-after-ms": "soon"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        # Only ASCII digits: float() would read "inf", "nan" and other scripts' digits.
        ({"Retry-After": "2", "retry-after-ms": "inf"}, 2.0),
        ({"Retry-After": "2", "retry-after-ms": "nan"}, 2.0),
        ({"Retry-After": "2", "retry-after-ms": "\u0663\u0660\u0660"}, 2.0),
        ({"Retry-After": "\u00b2"}, None),
        ({}, None),
    ],
)
def test_retry_after_ms_is_read_first(headers: dict[str, str], seconds: float | None) -> None:
    response = urllib3.HTTPResponse(b"", headers=headers, status=429, preload_content=False)
    assert retry_after_s(response) == seconds


@pytest.mark.parametrize(
    "retry_after_s,delay_s", [(0.0, 0.0), (3.0, 3.0), (30.0, 30.0), (31.0, 30.0), (3600.0, 30.0)]
)
def test_retry_after_is_honoured_up_to_its_cap(retry_after_s: float, delay_s: float) -> None:
    result = Attempt(retryable=True, status=429, retry_after_s=retry_after_s)
    for attempt_no in (0, 5):
        assert _backoff_s(SETTINGS, attempt_no, result) == delay_s


def test_a_read_timeout_mid_body_counts_as_a_timeout() -> None:
    # What urllib3 raises while a streamed body stalls, and while a connect does.
    mid_body = ReadTimeoutError(None, "/v1/chat/completions", "Read timed out.")  # type: ignore[arg-type]
    assert timed_out(mid_body) and timed_out(ConnectTimeoutError("connect timed out"))
    # A timeout that a wrapper carries as its first argument, or raised it from.
    assert timed_out(ProtocolError(TimeoutError("timed out")))
    try:
        raise ProtocolError("Connection broken") from TimeoutError()
    except ProtocolError as exc:
        assert timed_out(exc)
    assert not timed_out(NewConnectionError(None, "Connection refused"))  # type: ignore[arg-type]
    reset = ProtocolError("Connection broken", ConnectionResetError())
    assert not timed_out(reset)


def _writer(handle: Handle) -> DeltaWriter:
    # A store whose Redis nothing listens for: any write raises redis.ConnectionError.
    dead = redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=None)
    # Writes at every piece (max_chars 1), so that the attempt itself meets the dead store.
    return DeltaWriter(Store(dead, 60), handle, 1)


def _attempt(url: str, body: dict[str, object]) -> Attempt:
    # A deadline close by: the worker retries a store step through Redis errors until then.
    handle = Handle("job_policy", "run", time.monotonic() + 1.0)
    session = UpstreamSession((url,), maxsize=2)
    return attempt(session, url, body, {}, Timeouts(1, 5, 5), handle, _writer(handle), Redactor())


def test_an_unexpected_exception_is_a_failed_attempt_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A body that JSON cannot encode raises TypeError inside the attempt.
    url = f"http://127.0.0.1:{free_port()}/v1/chat/completions"
    with caplog.at_level(logging.ERROR, logger="worker.upstream.client"):
        result = _attempt(url, {"messages": {"not", "json"}})
    assert (result.ok, result.retryable, result.code) == (False, False, "internal_error")
    assert result.label == "internal_error" and "Traceback" not in result.message
    (record,) = caplog.records
    assert "job_policy" in record.getMessage() and record.exc_info is not None


def test_a_store_error_inside_an_attempt_is_raised_unchanged() -> None:
    from tests.shapes_upstream import ShapesUpstream

    upstream = ShapesUpstream()
    try:
        with pytest.raises(redis.ConnectionError):
            _attempt(upstream.url + "/chat/completions", {"model": "shape:ok"})
        assert upstream.calls_to("ok") == 1
    finally:
        upstream.stop()
