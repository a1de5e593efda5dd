"""Every header and query parameter of the API, declared once: its name, where it is sent,
its type, bounds and default, and what it does. The readers of web/http/params.py take a
request's values by these rows, and the OpenAPI document (web/openapi/parts.py) describes
each row as a parameter component."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from chatq.chat import OVERFLOW_POLICIES
from chatq.config import Settings
from chatq.jobs import PRIORITIES
from chatq.webhooks import MAX_LOG_PAGE


@dataclass(frozen=True)
class Param:
    """One parameter, `key` naming its component. `least` and `most` bound a number (a
    string's length); the default is `default`, or the setting named `setting`; a value it
    does not take is a 400 with `code`, which says it must be what `taken` says."""

    key: str
    name: str
    where: Literal["query", "header"]
    doc: str
    kind: Literal["string", "integer", "number", "boolean"] = "string"
    values: tuple[str, ...] = ()
    least: float | None = None
    most: float | None = None
    default: str | float | None = None
    setting: str = ""
    unit: str = ""
    code: str = "invalid_request"
    example: tuple[str, str] | None = None  # its name and value

    def default_in(self, settings: Settings) -> Any:
        """The value taken when none is sent, under `settings`."""
        return getattr(settings, self.setting) if self.setting else self.default

    def taken(self) -> str:
        """What it takes, in words: `a whole number from 1 to 100`."""
        if self.values:
            *others, last = self.values
            return f"{', '.join(others)} or {last}" if others else last
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "string":
            return f"{self.least:g} to {self.most:g} characters"
        if self.kind == "number":
            noun = "a finite number"
        else:
            noun = "an integer" if self.least is None else "a whole number"
        noun += self.unit
        if self.least is not None and self.most is not None:
            return f"{noun} from {self.least:g} to {self.most:g}"
        return f"{noun} >= {self.least:g}" if self.least is not None else noun

    def schema(self, settings: Settings) -> dict[str, Any]:
        """Its JSON Schema, with its default under `settings`."""
        schema: dict[str, Any] = {"type": self.kind}
        if self.values:
            schema["enum"] = list(self.values)
        words = ("minLength", "maxLength") if self.kind == "string" else ("minimum", "maximum")
        bounds = zip(words, (self.least, self.most), strict=True)
        schema |= {word: _plain(bound) for word, bound in bounds if bound is not None}
        default = self.default_in(settings)
        return schema if default is None else {**schema, "default": _plain(default)}

    def component(self, settings: Settings) -> dict[str, Any]:
        """The parameter as the OpenAPI document describes it."""
        described = {"name": self.name, "in": self.where, "schema": self.schema(settings)}
        described["description"] = self.doc
        if self.example:
            described["examples"] = {self.example[0]: {"value": self.example[1]}}
        return described


def _plain(number: Any) -> Any:
    """A whole float as an int, as the document writes bounds and defaults."""
    return int(number) if isinstance(number, float) and number.is_integer() else number


_WAIT = "Seconds to hold the request, fractions allowed, capped at CHATQ_MAX_WAIT (default 55)."
WAIT = Param(
    "Wait",
    "wait",
    "query",
    _WAIT,
    "number",
    least=0,
    default=0,
    unit=" of seconds",
    code="invalid_wait",
)
RESULT_WAIT = replace(WAIT, key="ResultWait", default=None, setting="result_wait_s")
RESPONSE_WAIT = replace(
    WAIT,
    key="ResponseWait",
    doc="Seconds to hold until the response ends (capped at CHATQ_MAX_WAIT).",
)
PREFER = Param(
    "Prefer",
    "Prefer",
    "header",
    "RFC 7240. `wait=N`: as `?wait=N`, which wins if both are given. `respond-async`: see "
    "/v1/chat/completions.",
    example=("wait", "wait=30"),
)
PRIORITY = Param(
    "Priority",
    "priority",
    "query",
    "Two queues; workers drain `interactive` first.",
    values=PRIORITIES,
    default=PRIORITIES[0],
)
IDEMPOTENCY_KEY = Param(
    "IdempotencyKey",
    "Idempotency-Key",
    "header",
    "The same key from the same owner within CHATQ_JOB_TTL returns the same job instead of a "
    "new one.",
    least=1,
    most=255,
)
CACHE_CONTROL = Param(
    "CacheControl",
    "Cache-Control",
    "header",
    "`no-cache` skips the result cache on the way in; `no-store` keeps this result out of it; "
    "`max-age=N` makes a non-deterministic request cacheable for N s (at most "
    "CHATQ_CACHE_TTL; no caching at all when that is 0).",
)
CONTEXT_OVERFLOW = Param(
    "ContextOverflow",
    "Chatq-Context-Overflow",
    "header",
    "A prompt over the model's context limit: `422`, or drop the oldest turns after the "
    "system message until it fits. Default from configuration.",
    values=OVERFLOW_POLICIES,
    setting="context_overflow",
)
WEBHOOK = Param(
    "Webhook",
    "Chatq-Webhook",
    "header",
    "The id of one of this key's webhook endpoints: only it hears of this job's end; `none`: "
    "no endpoint does. Without it every endpoint of the key does. An id that is not this "
    "key's is `400 webhook_not_found`.",
    code="webhook_not_found",
)
CURSOR = Param(
    "Cursor",
    "cursor",
    "query",
    "Opaque; pass back what a page gave. Absent: the first event.",
    code="invalid_cursor",
)
LAST_EVENT_ID = Param(
    "LastEventId",
    "Last-Event-ID",
    "header",
    "Server-Sent Events: resume after this cursor.",
    code="invalid_cursor",
)
ACCEPT = Param(
    "Accept",
    "Accept",
    "header",
    "`text/event-stream` serves the events as Server-Sent Events.",
    values=("application/json", "text/event-stream"),
)
TRACEPARENT = Param(
    "Traceparent",
    "traceparent",
    "header",
    "W3C trace context: the request and its job join this trace, and the upstream's calls "
    "continue it. Absent or invalid: a trace of its own.",
)
TRACESTATE = Param(
    "Tracestate", "tracestate", "header", "W3C trace state, kept with `traceparent`."
)
STREAM = Param(
    "Stream",
    "stream",
    "query",
    "Answer the response's events as Server-Sent Events.",
    "boolean",
    default=False,
)
STARTING_AFTER = Param(
    "StartingAfter",
    "starting_after",
    "query",
    "With `stream=true`: only the events numbered above this (ignored without it).",
    "integer",
    default=-1,
    unit=" (a sequence number)",
)
# Read, not in the document: a Responses stream resumed by its SSE `Last-Event-ID` (the
# document's LastEventId), and an option it refuses.
RESUME_AFTER = replace(
    STARTING_AFTER, name=LAST_EVENT_ID.name, where=LAST_EVENT_ID.where, code=LAST_EVENT_ID.code
)
INCLUDE_OBFUSCATION = replace(
    STREAM, key="IncludeObfuscation", name="include_obfuscation", doc="`true` is unsupported."
)


def _page(key: str, item: str, items: str, most: int, default: int) -> tuple[Param, Param]:
    """A listing's `limit` and `after`: at most `most` items a page, `default` if not said."""
    what = f"At most this many {items}."
    limit = Param(f"{key}Limit", "limit", "query", what, "integer", least=1, most=most)
    after = f"A {item} id: the page starts after it."
    return replace(limit, default=default), Param(f"{key}After", "after", "query", after)


FILES_LIMIT, FILES_AFTER = _page("Files", "file", "files", 10000, 10000)
BATCHES_LIMIT, BATCHES_AFTER = _page("Batches", "batch", "batches", 100, 20)
DELIVERIES_LIMIT, DELIVERIES_AFTER = _page("Deliveries", "delivery", "deliveries", MAX_LOG_PAGE, 20)
FILES_ORDER = Param(
    "FilesOrder",
    "order",
    "query",
    "By creation time.",
    values=("asc", "desc"),
    default="desc",
)
FILES_PURPOSE = Param("FilesPurpose", "purpose", "query", "Only files of this purpose.")

# Every row, in the order of the document's components.
PARAMETERS = (
    PREFER,
    PRIORITY,
    IDEMPOTENCY_KEY,
    CACHE_CONTROL,
    CONTEXT_OVERFLOW,
    WEBHOOK,
    CURSOR,
    LAST_EVENT_ID,
    TRACEPARENT,
    TRACESTATE,
    ACCEPT,
    WAIT,
    RESULT_WAIT,
    RESPONSE_WAIT,
    STREAM,
    STARTING_AFTER,
    FILES_LIMIT,
    FILES_AFTER,
    FILES_ORDER,
    FILES_PURPOSE,
    BATCHES_LIMIT,
    BATCHES_AFTER,
    DELIVERIES_LIMIT,
    DELIVERIES_AFTER,
)
