"""Secrets never reach a log line: the redacting filter, and every log of this test session."""

from __future__ import annotations

import io
import logging

from chatq.logs import REDACTED, RedactingFilter, Redactor, install_redaction


def test_redactor_removes_keys_of_any_shape() -> None:
    redact = Redactor(["configured-secret-123"])
    text = ("key sk-abc123def456ghi and sk-proj-ZZZ_yyy-xxx1 with Authorization: Bearer tok.en-1 "
            "and configured-secret-123")
    out = redact(text)
    for secret in ("sk-abc123def456ghi", "sk-proj-ZZZ_yyy-xxx1", "tok.en-1",
                   "configured-secret-123"):
        assert secret not in out
    assert out.count(REDACTED) == 4


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
