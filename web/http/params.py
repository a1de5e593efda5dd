"""Reading what a request asks for: its JSON body, `wait`, and the other options."""

from __future__ import annotations

import math
import random
import re
from typing import Any

from flask import current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from chatq.chat import json_input
from chatq.chat.tokens import Policy
from chatq.errors import ApiError
from chatq.jobs import record as jobs

_NUMBER = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,3})?\Z")
_PREFER_WAIT = re.compile(r"(?:^|[,;\s])wait\s*=\s*\"?([^\s,;\"]+)", re.IGNORECASE)
_JOB_ID = re.compile(r"^job_[A-Za-z0-9_-]{16,64}$")
# ASCII digits only: int() also takes other scripts' digits ("٣"), spaces, "+" and "_", and
# raises on some characters str.isdigit() calls digits ("²") and past 4,300 digits.
_WHOLE = re.compile(r"[0-9]+")
_SIGNED = re.compile(r"-?[0-9]+")
MAX_INT_DIGITS = 18
HUGE_INT = 10**18  # what a longer number reads as
MAX_IDEMPOTENCY_KEY_CHARS = 255


def _read_body() -> bytes:
    """The body, refused with 413 past MAX_CONTENT_LENGTH, with or without Content-Length."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    raw = request.stream.read(limit)
    # A chunked body stops at the limit without a word: one more byte tells if it was cut.
    if len(raw) >= limit and request.stream.read(1):
        raise RequestEntityTooLarge()
    return raw


def json_body() -> dict[str, Any]:
    """The body parsed as a JSON object in UTF-8, whatever the Content-Type says; a number
    out of a float's range or a lone surrogate is a 400 naming the field (chatq/json_input)."""
    raw = _read_body()
    try:
        body = json_input.parse(raw.decode("utf-8"))
    except json_input.NestedTooDeeply as exc:
        raise ApiError(400, "invalid_json", f"The body {exc}.") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "invalid_json", "The body is not valid JSON in UTF-8.") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "The body must be a JSON object.")
    return body


def _parse_wait(raw: str) -> float | None:
    raw = raw.strip()
    if not _NUMBER.match(raw):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


def ascii_int(raw: str, *, signed: bool = False) -> int | None:
    """`raw` as an integer when it is ASCII digits only (after a `-` if `signed`), else None;
    past 18 digits it reads as ±10**18, beyond every limit and sequence number."""
    if not (_SIGNED if signed else _WHOLE).fullmatch(raw):
        return None
    if len(raw.lstrip("-").lstrip("0")) > MAX_INT_DIGITS:
        return -HUGE_INT if raw.startswith("-") else HUGE_INT
    return int(raw)


def limit_arg(default: int, maximum: int) -> int:
    """`?limit=`: a whole number from 1 to `maximum` (`default` when absent); else a 400."""
    raw = request.args.get("limit")
    if raw is None:
        return default
    value = ascii_int(raw)
    if value is None or not 1 <= value <= maximum:
        raise ApiError(
            400,
            "invalid_request",
            f"`limit` must be a whole number from 1 to {maximum}.",
            param="limit",
        )
    return value


def prefers_async() -> bool:
    """Whether the client sent `Prefer: respond-async`."""
    return "respond-async" in request.headers.get("Prefer", "").lower()


def prefer_wait() -> float | None:
    """The `wait` of a `Prefer` header, or None when absent or unreadable (RFC 7240: ignore)."""
    match = _PREFER_WAIT.search(request.headers.get("Prefer", ""))
    return _parse_wait(match.group(1)) if match else None


def requested_wait(default_s: float, max_s: float) -> tuple[float, bool]:
    """The wait to apply (capped) and whether the client asked for one.

    `?wait=N` wins over `Prefer: wait=N`; a bad query value is a 400.
    """
    raw = request.args.get("wait")
    if raw is not None:
        value = _parse_wait(raw)
        if value is None:
            raise ApiError(
                400, "invalid_wait", "`wait` must be a finite number of seconds >= 0.", param="wait"
            )
        return min(value, max_s), True
    value = prefer_wait()
    if value is not None:
        return min(value, max_s), True
    return min(default_s, max_s), False


def jittered(wait_s: float) -> float:
    """A wait that runs out somewhere in [15/16 N, N], so that clients spread out."""
    return wait_s * random.uniform(15 / 16, 1.0)


def priority() -> str:
    """`?priority=`, interactive by default."""
    value = request.args.get("priority", jobs.PRIORITIES[0])
    if value not in jobs.PRIORITIES:
        raise ApiError(
            400, "invalid_request", "`priority` must be interactive or batch.", param="priority"
        )
    return value


def idempotency_key() -> str | None:
    """The `Idempotency-Key` header, if sent."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not key or len(key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise ApiError(
            400,
            "invalid_request",
            f"`Idempotency-Key` must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters.",
            param="Idempotency-Key",
        )
    return key


def overflow_policy(default: str) -> Policy:
    """`Chatq-Context-Overflow`: reject or truncate_oldest (default from configuration)."""
    value = request.headers.get("Chatq-Context-Overflow", default).strip().lower()
    if value == "reject":
        return "reject"
    if value == "truncate_oldest":
        return "truncate_oldest"
    raise ApiError(
        400,
        "invalid_request",
        "`Chatq-Context-Overflow` must be reject or truncate_oldest.",
        param="Chatq-Context-Overflow",
    )


def is_job_id(value: str) -> bool:
    """Whether `value` has the shape of a job id at all."""
    return bool(_JOB_ID.match(value))
