"""Secrets never reach a log line: the redacting filter, and every log of this test session."""

from __future__ import annotations

import io
import logging

from chatq.runtime.logs import (
    KEPT_TEXTS,
    REDACTED,
    SHORT_TEXT_CHARS,
    RedactingFilter,
    Redactor,
    formatter,
    install_redaction,
)
from tests.procs import python_output


def test_redactor_removes_keys_of_any_shape() -> None:
    redact = Redactor(["configured-secret-123"])
    text = (
        "key sk-abc123def456ghi and sk-proj-ZZZ_yyy-xxx1 with Authorization: Bearer tok.en-1 "
        "and configured-secret-123"
    )
    out = redact(text)
    for secret in (
        "sk-abc123def456ghi",
        "sk-proj-ZZZ_yyy-xxx1",
        "tok.en-1",
        "configured-secret-123",
    ):
        assert secret not in out
    assert out.count(REDACTED) == 4


def test_a_short_text_seen_before_is_redacted_each_time_and_what_is_kept_is_bounded() -> None:
    redact = Redactor(["configured-secret-123"])
    short = "k=configured-secret-123"
    long = "x" * SHORT_TEXT_CHARS + " sk-abc123def456ghi"
    for _ in range(3):
        assert redact(short) == f"k={REDACTED}"
        assert redact(long) == "x" * SHORT_TEXT_CHARS + f" {REDACTED}"
        assert redact("GET") == "GET"
    for n in range(3 * KEPT_TEXTS):
        assert redact(f"job_{n} sk-{n:06d}") == f"job_{n} {REDACTED}"
    assert len(redact._short) <= KEPT_TEXTS
    assert redact(short) == f"k={REDACTED}"


def test_the_filter_redacts_messages_arguments_and_tracebacks() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("chatq.test.redaction")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.propagate = False
    install_redaction(["my-upstream-key-77"])
    assert any(isinstance(f, RedactingFilter) for f in handler.filters)
    logger.warning("calling with %s", "Bearer my-upstream-key-77")
    try:
        raise ValueError("failed for sk-live-secret-000111")
    except ValueError:
        logger.exception("boom")
    logged = stream.getvalue()
    assert "my-upstream-key-77" not in logged and "sk-live-secret-000111" not in logged
    assert "ValueError" in logged and REDACTED in logged


def _logged_through_filter(log_format: str, **extra: object) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter(log_format))
    handler.addFilter(RedactingFilter(Redactor(["bare0key0secret77"])))
    logger = logging.getLogger(f"chatq.test.extra.{log_format}")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.info("request", extra=extra)
    return stream.getvalue()


def test_the_filter_redacts_every_string_extra_field_in_both_formats() -> None:
    nested = {"headers": ["Authorization: Bearer tok-in-a-list"], "n": 3}
    for log_format in ("text", "json"):
        logged = _logged_through_filter(
            log_format,
            key="bare0key0secret77",
            path="/v1/jobs?k=sk-inpath0123",
            event="Bearer tok-in-extra",
            custom="bare0key0secret77",
            nested=nested,
        )
        for secret in ("bare0key0secret77", "sk-inpath0123", "tok-in-extra"):
            assert secret not in logged, (log_format, logged)
        # Context fields are still printed, redacted.
        assert f"{REDACTED}" in logged and "/v1/jobs" in logged
    # A caller's own object is not changed by the filter, only the record's copy.
    assert nested["headers"] == ["Authorization: Bearer tok-in-a-list"]


def test_the_filter_redacts_extra_fields_no_formatter_prints_and_keeps_the_rest() -> None:
    record = logging.makeLogRecord(
        {
            "msg": "x",
            "status": 200,
            "duration_ms": 1.5,
            "job_id": "job_abc",
            "custom": "bare0key0secret77",
            "pair": ("a", "Bearer tok-in-a-tuple"),
        }
    )
    RedactingFilter(Redactor(["bare0key0secret77"])).filter(record)
    assert (record.status, record.duration_ms, record.job_id) == (200, 1.5, "job_abc")
    assert record.custom == REDACTED and record.pair == ("a", REDACTED)


def test_greenlets_that_log_get_no_thread_object_each() -> None:
    """Under gevent a record's thread name made a dummy Thread per greenlet that logged, kept
    until the greenlet ended: per parked request, objects for every collection to walk."""
    code = (
        "from chatq import gevent_patch\n"
        "gevent_patch.patch_all()\n"
        "import io, logging, sys, threading, gevent, gevent.event\n"
        "from chatq.runtime import logs\n"
        "sys.stderr = io.StringIO()\n"
        "logs.setup('INFO', [], 'text')\n"
        "parked = gevent.event.Event()\n"
        "def run():\n"
        "    logging.getLogger('chatq.test').info('a line')\n"
        "    parked.wait()\n"
        "greenlets = [gevent.spawn(run) for _ in range(50)]\n"
        "gevent.sleep(0.1)\n"
        "assert 'a line' in sys.stderr.getvalue()\n"
        "print(len(threading.enumerate()))\n"
        "parked.set()\n"
    )
    assert python_output(code) == "1"
