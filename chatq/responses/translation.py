"""OpenAI's Responses API, text subset, as chatq jobs: ids and the request translation.

A response IS a chat job. `translate` turns a `POST /v1/responses` body into the chat request
the job sends upstream, plus the record fields that render it back as a Response object
(chatq/responses/view.py); the request is checked, and `input` becomes messages, in
chatq/responses/inputs.py. Anything the text subset cannot honour is a 400 naming the
parameter, never dropped. No Flask here: the batch side imports it too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from chatq.chat import check_caps
from chatq.config import Settings
from chatq.responses.inputs import JSONDict, input_messages, invalid
from chatq.responses.objects import FormatJSONObject, FormatJSONSchema, ResponseRequest

API = "responses"  # the record field `api` of a response's job

# A response's id, or its job's (the document's path parameter too).
ID_PATTERN = "^(job|resp)_([A-Za-z0-9_-]{16,64})$"
_ID = re.compile(ID_PATTERN)
# The fields that multiply the operator's bill, each with the setting that caps it.
CAPPED = {"max_output_tokens": "max_output_tokens"}
# Passed to the upstream under the same name, as strings.
PASSED_STRINGS = ("user", "safety_identifier", "prompt_cache_key", "service_tier")
V = TypeVar("V")


def given(value: V | UnsetType | None) -> V | None:
    """A field of a checked request, None when it was not sent (or sent as null)."""
    return None if value is UNSET else value


def response_id(job_id: str) -> str:
    """The response id of a job: `resp_` and the job's token."""
    return "resp_" + job_id.removeprefix("job_")


def message_id(job_id: str) -> str:
    """The id of a response's output message: `msg_` and the job's token."""
    return "msg_" + job_id.removeprefix("job_")


def job_id_of(any_id: str) -> str | None:
    """The job id behind a `resp_…` (or `job_…`) id; None when it has neither shape."""
    match = _ID.fullmatch(any_id)
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


def _max_output_tokens(req: ResponseRequest, settings: Settings) -> int | None:
    value = given(req.max_output_tokens)
    check_caps({"max_output_tokens": value}, settings, CAPPED)
    return value


def _response_format(req: ResponseRequest) -> JSONDict | None:
    """`text.format` as the chat `response_format` (None for plain text)."""
    text = given(req.text)
    fmt = given(text.format) if text is not None else None
    if isinstance(fmt, FormatJSONObject):
        return {"type": "json_object"}
    if not isinstance(fmt, FormatJSONSchema):
        return None
    schema = {k: v for k, v in msgspec.to_builtins(fmt).items() if k != "type"}
    return {"type": "json_schema", "json_schema": schema}


def _chat_request(
    req: ResponseRequest, settings: Settings, history: list[JSONDict], max_tokens: int | None
) -> JSONDict:
    instructions = given(req.instructions)
    messages = [{"role": "system", "content": instructions}] if instructions is not None else []
    messages += history + input_messages(req.input)
    request: JSONDict = {"model": given(req.model) or settings.default_model}
    request["messages"] = messages
    passed = {name: getattr(req, name) for name in ("temperature", "top_p", *PASSED_STRINGS)}
    request |= {name: value for name, value in passed.items() if given(value) is not None}
    if max_tokens is not None:
        request["max_tokens"] = max_tokens
    response_format = _response_format(req)
    if response_format is not None:
        request["response_format"] = response_format
    return request


def translate(
    req: ResponseRequest, settings: Settings, history: list[JSONDict] | None = None
) -> Translated:
    """The chat job for a checked Responses request (chatq/responses/inputs.py); `history` is
    the conversation of its `previous_response_id` (see `conversation`). Raises a 400
    ApiError naming the parameter."""
    background, store = req.background is True, req.store is not False
    if background and not store:
        raise invalid(
            "`background` needs `store`: a background response is fetched later.", "store"
        )
    truncation = given(req.truncation)
    max_tokens = _max_output_tokens(req, settings)
    request = _chat_request(req, settings, history or [], max_tokens)
    shown = {
        "instructions": given(req.instructions),
        "metadata": given(req.metadata),
        "previous_response_id": given(req.previous_response_id),
        "max_output_tokens": max_tokens,
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "background": background or None,
        "store": None if store else False,
        "truncation": truncation,
        "text": msgspec.to_builtins(req.text) if given(req.text) is not None else None,
    }
    compact = {k: v for k, v in shown.items() if v is not None}
    fields = {"api": API, "response": json.dumps(compact, separators=(",", ":"))}
    truncate = None if truncation is None else truncation == "auto"
    return Translated(request, fields, req.stream is True, background, store, truncate)


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
