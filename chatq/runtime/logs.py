"""Logging set-up shared by every chatq process, with secrets redacted everywhere."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable

REDACTED = "[REDACTED]"
_PATTERNS = [
    r"\bsk-[A-Za-z0-9_\-]{4,}",
    r"\b(?i:bearer)\s+[^\s\"',;]+",
    r"\bwhsec_[A-Za-z0-9+/=]{4,}",  # webhook signing secrets
]


# Short texts come back again and again (a method, a route, a key's name, a logger's message):
# their redacted form is kept, up to this many, rather than searched for each log line.
SHORT_TEXT_CHARS = 64
KEPT_TEXTS = 4096


class Redactor:
    """Removes API keys from text: `sk-…` keys, bearer tokens and configured secrets."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        known = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
        # One pass over the text: the configured secrets (longest first), then the shapes.
        self._pattern = re.compile("|".join([*map(re.escape, known), *_PATTERNS]))
        self._short: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        if len(text) > SHORT_TEXT_CHARS:
            return self._pattern.sub(REDACTED, text)
        redacted = self._short.get(text)
        if redacted is None:
            if len(self._short) >= KEPT_TEXTS:
                self._short.clear()
            redacted = self._short[text] = self._pattern.sub(REDACTED, text)
        return redacted


# What every LogRecord has; anything else on a record came from a caller's `extra=`.
_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class RedactingFilter(logging.Filter):
    """A handler filter that rewrites a record's message, traceback and extra fields redacted."""

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
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        fields = vars(record)
        for name in fields.keys() - _RECORD_FIELDS:
            fields[name] = self._scrub(fields[name])
        return True

    def _scrub(self, value: object) -> object:
        """Strings redacted, also inside lists, tuples and dicts (copied, never changed)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list | tuple):
            items = [self._scrub(item) for item in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {self._scrub(k): self._scrub(v) for k, v in value.items()}
        return value


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


# Context a log call may add with `extra=`; printed when present.
CONTEXT_FIELDS = ("job_id", "key", "method", "path", "status", "duration_ms", "event")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any context fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        line: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            if hasattr(record, name):
                line[name] = getattr(record, name)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """Plain lines, with the context fields appended as key=value."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The record as a text line."""
        text = super().format(record)
        context = [f"{n}={getattr(record, n)}" for n in CONTEXT_FIELDS if hasattr(record, n)]
        return f"{text} {' '.join(context)}" if context else text


def formatter(log_format: str) -> logging.Formatter:
    """The formatter for CHATQ_LOG_FORMAT (json or text)."""
    return JsonFormatter() if log_format == "json" else TextFormatter()


def setup(level: str, secrets: Iterable[str], log_format: str = "text") -> None:
    """Log to stderr at `level` in `log_format`, every handler redacting secrets."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stderr))
    for handler in root.handlers:
        handler.setFormatter(formatter(log_format))
    root.setLevel(level)
    # Records skip what no format prints (the logging HOWTO's "Optimization"): the caller's
    # file and line (a walk up the stack for each record), and the thread's name: under
    # gevent, each greenlet that logs would get a dummy Thread object of its own, kept until
    # the greenlet ends. (gunicorn's own lines print the process id: that one stays.)
    logging._srcfile = None
    logging.logThreads = False
    install_redaction(secrets)
