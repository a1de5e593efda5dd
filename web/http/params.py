"""Reading what a request asks for: its JSON body, and its header and query parameters by
their rows in web/http/parameters.py (`wait`, `limit`, `priority`, ...)."""

from __future__ import annotations

import math
import random
import re
from typing import Any, cast

from flask import current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from chatq import chat
from chatq.chat import Policy
from chatq.config import Settings
from chatq.errors import ApiError
from chatq.jobs import JOB_ID_PATTERN
from web.http.parameters import CONTEXT_OVERFLOW, PREFER, Param

_NUMBER = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,3})?\Z")
_PREFER_WAIT = re.compile(r"(?:^|[,;\s])wait\s*=\s*\"?([^\s,;\"]+)", re.IGNORECASE)
_JOB_ID = re.compile(JOB_ID_PATTERN)
# ASCII digits only: int() also takes other scripts' digits ("٣"), spaces, "+" and "_", and
# raises on some characters str.isdigit() calls digits ("²") and past 4,300 digits.
_WHOLE = re.compile(r"[0-9]+")
_SIGNED = re.compile(r"-?[0-9]+")
MAX_INT_DIGITS = 18
HUGE_INT = 10**18  # what a longer number reads as


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
        body = chat.parse(raw.decode("utf-8"))
    except chat.NestedTooDeeply as exc:
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


def _sent(param: Param) -> str | None:
    return (request.args if param.where == "query" else request.headers).get(param.name)


def _refused(param: Param) -> ApiError:
    return ApiError(400, param.code, f"`{param.name}` must be {param.taken()}.", param=param.name)


def _within(param: Param, value: float) -> bool:
    low, high = param.least, param.most
    return (low is None or value >= low) and (high is None or value <= high)


def text(param: Param) -> str | None:
    """The string `param` as sent (None if not), of a length within its bounds; else a 400."""
    value = _sent(param)
    if value is not None and param.least is not None and not _within(param, len(value)):
        raise _refused(param)
    return value


def whole(param: Param) -> int:
    """The integer `param` (ASCII digits only), its default when not sent; else a 400."""
    raw = _sent(param)
    if raw is None:
        return int(param.default or 0)
    value = ascii_int(raw, signed=param.least is None)
    if value is None or not _within(param, value):
        raise _refused(param)
    return value


def choice(param: Param, settings: Settings) -> str:
    """One of `param`'s values (a header's in any case), its default when not sent."""
    value = _sent(param)
    if value is None:
        return str(param.default_in(settings))
    if param.where == "header":
        value = value.strip().lower()
    if value not in param.values:
        raise _refused(param)
    return value


def flag(param: Param) -> bool:
    """The boolean `param`: `true` or `false` in any case, its default when not sent."""
    value = _sent(param)
    if value is None:
        return bool(param.default)
    if value.lower() not in ("true", "false"):
        raise _refused(param)
    return value.lower() == "true"


def prefers_async() -> bool:
    """Whether the client sent `Prefer: respond-async`."""
    return "respond-async" in (_sent(PREFER) or "").lower()


def prefer_wait() -> float | None:
    """The `wait` of a `Prefer` header, or None when absent or unreadable (RFC 7240: ignore)."""
    match = _PREFER_WAIT.search(_sent(PREFER) or "")
    return _parse_wait(match.group(1)) if match else None


def requested_wait(param: Param, settings: Settings) -> tuple[float, bool]:
    """The wait to apply (capped at CHATQ_MAX_WAIT) and whether the client asked for one.

    `?wait=N` wins over `Prefer: wait=N`; a bad query value is a 400.
    """
    max_s, raw = settings.max_wait_s, _sent(param)
    if raw is not None:
        value = _parse_wait(raw)
        if value is None:
            raise _refused(param)
        return min(value, max_s), True
    value = prefer_wait()
    if value is not None:
        return min(value, max_s), True
    return min(float(param.default_in(settings)), max_s), False


def jittered(wait_s: float) -> float:
    """A wait that runs out somewhere in [15/16 N, N], so that clients spread out."""
    return wait_s * random.uniform(15 / 16, 1.0)


def overflow_policy(settings: Settings) -> Policy:
    """`Chatq-Context-Overflow`: reject or truncate_oldest (default from configuration)."""
    return cast(Policy, choice(CONTEXT_OVERFLOW, settings))


def is_job_id(value: str) -> bool:
    """Whether `value` has the shape of a job id at all."""
    return bool(_JOB_ID.fullmatch(value))
