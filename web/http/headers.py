"""Every header chatq's answers carry, declared once: its name and what it says. The code that
sets a header names it by its row, and the OpenAPI document (web/openapi/parts.py) describes
each row of HEADERS as a header component. Request headers are parameters
(web/http/parameters.py)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, NamedTuple


def _string() -> dict[str, Any]:
    return {"type": "string"}


@dataclass(frozen=True)
class Header:
    """One header of the answers: its `name`, what it says (`doc`), its value's schema."""

    name: str
    doc: str
    schema: dict[str, Any] = field(default_factory=_string)

    def component(self) -> dict[str, Any]:
        """The header as the OpenAPI document describes it."""
        return {"description": self.doc, "schema": copy.deepcopy(self.schema)}


LOCATION = Header("Location", "`/v1/jobs/{id}`: where to poll the job.")
RETRY_AFTER = Header(
    "Retry-After", "Seconds to wait before trying again.", {"type": "integer", "minimum": 0}
)
PREFERENCE_APPLIED = Header(
    "Preference-Applied",
    "What was honoured of `Prefer`: `wait=N` (the wait applied), `respond-async`, or both.",
)
JOB_ID_HEADER = Header("Chatq-Job-Id", "The id of the job behind this answer.")
TRACE_ID_HEADER = Header(
    "Chatq-Trace-Id",
    "The W3C trace id (32 hex digits) of the trace the request and its job are in.",
    {"type": "string", "pattern": "^[0-9a-f]{32}$"},
)
SHOULD_RETRY = Header(
    "x-should-retry",
    "`false` on an error of a job that exists: chatq has retried the upstream itself, and a "
    "resend would start a second job (the OpenAI SDKs obey it); and on a 429 that a retry "
    "cannot pass (a key's budget spent).",
    {"type": "string", "enum": ["false"]},
)
_COUNT = {"type": "string", "pattern": "^[0-9]+$"}


class RateHeaders(NamedTuple):
    """OpenAI's headers of one of a key's minute limits."""

    limit: Header
    remaining: Header
    reset: Header


def _rate(kind: str, what: str) -> RateHeaders:
    return RateHeaders(
        Header(
            f"x-ratelimit-limit-{kind}",
            f"The key's {what} (only when it has such a limit).",
            _COUNT,
        ),
        Header(f"x-ratelimit-remaining-{kind}", f"What is left of the key's {what} now.", _COUNT),
        Header(
            f"x-ratelimit-reset-{kind}",
            f"How long until the key's {what} are whole again, as OpenAI writes it (`250ms`, "
            "`8.64s`, `6m0s`).",
        ),
    )


REQUEST_LIMITS = _rate("requests", "requests per minute")
TOKEN_LIMITS = _rate("tokens", "tokens per minute")
RETRY_AFTER_MS = Header(
    "retry-after-ms",
    "On a 429 of a minute's limit: milliseconds until this request would pass (the OpenAI "
    "SDKs read it before Retry-After).",
    _COUNT,
)

# Set, not in the document: what a path allows (its 405s and OPTIONS, said in the document's
# description), and what tells proxies not to hold a stream back.
ALLOW = Header("Allow", "The methods the path allows.")
STREAM_CACHE_CONTROL = Header("Cache-Control", "`no-cache`: a stream is not cached.")
ACCEL_BUFFERING = Header(
    "X-Accel-Buffering", "`no`: nginx passes a stream's events on as they come."
)

# Every row the document lists, in the order of its components.
HEADERS = (
    LOCATION,
    RETRY_AFTER,
    PREFERENCE_APPLIED,
    JOB_ID_HEADER,
    TRACE_ID_HEADER,
    SHOULD_RETRY,
    *REQUEST_LIMITS,
    *TOKEN_LIMITS,
    RETRY_AFTER_MS,
)
