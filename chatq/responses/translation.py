"""OpenAI's Responses API, text subset, as chatq jobs: ids and the request translation.

A response IS a chat job. `translate` turns a `POST /v1/responses` body into the chat request
the job sends upstream, plus the record fields that render it back as a Response object
(chatq/responses/view.py); `input` becomes messages in chatq/responses/inputs.py. Anything the
text subset cannot honour is a 400 naming the parameter, never dropped. No Flask here: the
batch side imports it too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, get_args

from chatq.chat.objects import MAX_TOKENS_LIMIT
from chatq.config.settings import Settings
from chatq.responses.inputs import JSONDict, input_messages, invalid, unsupported
from chatq.responses.objects import (
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
    MAX_METADATA_VALUE_CHARS,
    MIN_OUTPUT_TOKENS,
    ResponseRequest,
    Truncation,
)

API = "responses"  # the record field `api` of a response's job

_ID = re.compile(r"(job|resp)_([A-Za-z0-9_-]{16,64})\Z")
# Parameters that change nothing in a text-only response when they hold these values.
NO_OP_VALUES: dict[str, tuple[Any, ...]] = {
    "tools": ([],),
    "include": ([],),
    "tool_choice": ("auto", "none"),
    "parallel_tool_calls": (True, False),
    "reasoning": ({},),
    "stream_options": ({}, {"include_obfuscation": False}),
}
# Passed to the upstream under the same name, as strings.
PASSED_STRINGS = ("user", "safety_identifier", "prompt_cache_key", "service_tier")
# Every field of the request the text subset honours (the struct), and the no-op ones.
HANDLED = frozenset({*ResponseRequest.__struct_fields__, *NO_OP_VALUES})


def response_id(job_id: str) -> str:
    """The response id of a job: `resp_` and the job's token."""
    return "resp_" + job_id.removeprefix("job_")


def message_id(job_id: str) -> str:
    """The id of a response's output message: `msg_` and the job's token."""
    return "msg_" + job_id.removeprefix("job_")


def job_id_of(any_id: str) -> str | None:
    """The job id behind a `resp_…` (or `job_…`) id; None when it has neither shape."""
    match = _ID.match(any_id)
    return f"job_{match.group(2)}" if match else None


@dataclass(frozen=True)
class Translated:
    """A Responses request as a chat job: what to send upstream, and how it was asked."""

    request: JSONDict  # the chat-completion request
    fields: dict[str, str]  # extra record fields: `api` and `response` (JSON)
    stream: bool
    background: bool
    store: bool
    truncate: bool | None  # `truncation`: auto -> True, disabled -> False, absent -> None


def _typed(body: JSONDict, name: str, types: tuple[type, ...], what: str) -> Any:
    value = body.get(name)
    if value is not None and (
        (isinstance(value, bool) and bool not in types) or not isinstance(value, types)
    ):
        raise invalid(f"`{name}` must be {what}.", name)
    return value


def _number(body: JSONDict, name: str, high: float) -> float | None:
    value = _typed(body, name, (int, float), "a number")
    if value is not None and not 0 <= value <= high:
        raise invalid(f"`{name}` must be between 0 and {high:g}, got {str(value)[:30]}.", name)
    return value  # type: ignore[no-any-return]


def _check_params(body: JSONDict) -> None:
    for name, value in body.items():
        if value is None:
            continue
        if name not in HANDLED:
            raise unsupported(name)
        if name in NO_OP_VALUES and value not in NO_OP_VALUES[name]:
            allowed = " or ".join(json.dumps(v) for v in NO_OP_VALUES[name])
            raise unsupported(name, f"; it takes only {allowed}")


def _metadata(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    ok = (
        isinstance(value, dict)
        and len(value) <= MAX_METADATA_KEYS
        and all(
            isinstance(k, str)
            and len(k) <= MAX_METADATA_KEY_CHARS
            and isinstance(v, str)
            and len(v) <= MAX_METADATA_VALUE_CHARS
            for k, v in value.items()
        )
    )
    if not ok:
        raise invalid(
            f"`metadata` must be an object of at most {MAX_METADATA_KEYS} string "
            f"values, keys up to {MAX_METADATA_KEY_CHARS} characters, values up to "
            f"{MAX_METADATA_VALUE_CHARS}.",
            "metadata",
        )
    return dict(value)


def _max_output_tokens(body: JSONDict, cap: int) -> int | None:
    value = _typed(body, "max_output_tokens", (int,), "an integer")
    if value is None:
        return None
    if value < MIN_OUTPUT_TOKENS:
        raise invalid(
            f"`max_output_tokens` must be at least {MIN_OUTPUT_TOKENS}, got {value}.",
            "max_output_tokens",
        )
    if value > MAX_TOKENS_LIMIT:
        raise invalid(
            f"`max_output_tokens` must be at most {MAX_TOKENS_LIMIT}, got {value}.",
            "max_output_tokens",
        )
    if cap > 0 and value > cap:
        raise invalid(
            f"`max_output_tokens` is {value}, over the {cap} this server allows.",
            "max_output_tokens",
        )
    return int(value)


def _response_format(text: Any) -> JSONDict | None:
    """`text.format` as the chat `response_format` (None for plain text)."""
    if text is None:
        return None
    if not isinstance(text, dict):
        raise invalid("`text` must be an object.", "text")
    for key, value in text.items():
        if key not in ("format", "verbosity"):
            raise unsupported(f"text.{key}")
        if key == "verbosity" and value is not None:
            raise unsupported("text.verbosity")
    fmt = text.get("format")
    if fmt is None or (isinstance(fmt, dict) and fmt.get("type") == "text"):
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_object", "json_schema"):
        raise invalid("`text.format.type` must be text, json_object or json_schema.", "text.format")
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    if not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict):
        raise invalid(
            "`text.format` of type json_schema needs a `name` and a `schema`.", "text.format"
        )
    schema = {k: fmt[k] for k in ("name", "schema", "description", "strict") if k in fmt}
    return {"type": "json_schema", "json_schema": schema}


def _flags(body: JSONDict) -> tuple[bool, bool, bool]:
    stream = _typed(body, "stream", (bool,), "true or false") or False
    background = _typed(body, "background", (bool,), "true or false") or False
    store = _typed(body, "store", (bool,), "true or false")
    if background and store is False:
        raise invalid(
            "`background` needs `store`: a background response is fetched later.", "store"
        )
    return stream, background, store is not False


def _truncate(body: JSONDict) -> bool | None:
    value = body.get("truncation")
    if value is not None and value not in get_args(Truncation):
        raise invalid("`truncation` must be auto or disabled.", "truncation")
    return None if value is None else value == "auto"


def _chat_request(
    body: JSONDict, settings: Settings, history: list[JSONDict], max_tokens: int | None
) -> JSONDict:
    model = _typed(body, "model", (str,), "a string")
    if model == "":
        raise invalid("`model` must not be empty.", "model")
    instructions = _typed(body, "instructions", (str,), "a string")
    messages = [{"role": "system", "content": instructions}] if instructions is not None else []
    messages += history + input_messages(body.get("input"))
    request: JSONDict = {"model": model or settings.default_model, "messages": messages}
    for name, high in (("temperature", 2.0), ("top_p", 1.0)):
        value = _number(body, name, high)
        if value is not None:
            request[name] = value
    for name in PASSED_STRINGS:
        value = _typed(body, name, (str,), "a string")
        if value is not None:
            request[name] = value
    if max_tokens is not None:
        request["max_tokens"] = max_tokens
    response_format = _response_format(body.get("text"))
    if response_format is not None:
        request["response_format"] = response_format
    return request


def translate(
    body: JSONDict, settings: Settings, history: list[JSONDict] | None = None
) -> Translated:
    """The chat job for a Responses request; `history` is the conversation of its
    `previous_response_id` (see `conversation`). Raises a 400 ApiError naming the parameter."""
    _check_params(body)
    stream, background, store = _flags(body)
    truncate = _truncate(body)
    max_tokens = _max_output_tokens(body, settings.max_output_tokens)
    request = _chat_request(body, settings, history or [], max_tokens)
    previous = _typed(body, "previous_response_id", (str,), "a string")
    shown = {
        "instructions": body.get("instructions"),
        "metadata": _metadata(body.get("metadata")),
        "previous_response_id": previous,
        "max_output_tokens": max_tokens,
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "background": background or None,
        "store": None if store else False,
        "truncation": body.get("truncation"),
        "text": body.get("text"),
    }
    compact = {k: v for k, v in shown.items() if v is not None}
    fields = {"api": API, "response": json.dumps(compact, separators=(",", ":"))}
    return Translated(request, fields, stream, background, store, truncate)


def is_response(record: dict[str, str]) -> bool:
    """Whether a job record is a Responses API response."""
    return record.get("api") == API


def asked(record: dict[str, str]) -> JSONDict:
    """How the response was asked for (the record's `response` field)."""
    try:
        value = json.loads(record.get("response") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def is_stored(record: dict[str, str]) -> bool:
    """Whether the response may be fetched again (it was not created with `store: false`)."""
    return is_response(record) and asked(record).get("store") is not False


def conversation(record: dict[str, str]) -> list[JSONDict]:
    """An ended response's input and output as chat messages, less its instructions:
    what a response naming it as `previous_response_id` continues."""
    try:
        messages = list(json.loads(record.get("request") or "{}").get("messages") or [])
    except (ValueError, AttributeError):
        messages = []
    if asked(record).get("instructions") is not None:
        messages = messages[1:]
    return [*messages, {"role": "assistant", "content": record.get("output_text", "")}]
