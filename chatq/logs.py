"""Logging set-up shared by every chatq process, with secrets redacted everywhere."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable

REDACTED = "[REDACTED]"
_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{4,}"),
    re.compile(r"(?i)\bbearer\s+[^\s\"',;]+"),
]


class Redactor:
    """Removes API keys from text: `sk-…` keys, bearer tokens and configured secrets."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        for pattern in _PATTERNS:
            text = pattern.sub(REDACTED, text)
        return text


class RedactingFilter(logging.Filter):
    """A handler filter that rewrites each record's message and traceback redacted."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact the record in place; never drops it."""
        record.msg = self.redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


def _all_handlers() -> list[logging.Handler]:
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    return [h for lg in loggers for h in lg.handlers]


def install_redaction(secrets: Iterable[str]) -> RedactingFilter:
    """Attach one redacting filter to every handler that exists now."""
    flt = RedactingFilter(Redactor(secrets))
    for handler in _all_handlers():
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(flt)
    return flt


def setup(level: str, secrets: Iterable[str]) -> None:
    """Log to stderr at `level`, every handler redacting secrets."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root.addHandler(handler)
    root.setLevel(level)
    install_redaction(secrets)
