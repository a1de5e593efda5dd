"""Parse and validate a chat-completions request body."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from fakellm.errors import ApiError
from fakellm.knobs import KnobError, Knobs, UnknownModelError, parse_model
from fakellm.text import Message


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A validated chat-completions request."""

    body: dict[str, Any]
    model: str
    knobs: Knobs
    messages: list[Message]
    stream: bool
    include_usage: bool
    max_tokens: int | None = None  # `max_tokens` or `max_completion_tokens`: the answer's cap

    def key(self) -> str:
        """Identify "the same request" across attempts: a hash of the canonical body."""
        canonical = json.dumps(self.body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def _invalid(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def _load(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise _invalid("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.")
    return body


def _knobs(model: Any) -> Knobs:
    if not isinstance(model, str):
        raise _invalid("'model' must be a string.", "model")
    try:
        return parse_model(model)
    except UnknownModelError:
        raise ApiError(
            404, f"The model `{model}` does not exist.", param="model", code="model_not_found"
        ) from None
    except KnobError as exc:
        raise _invalid(f"Invalid model {model!r}: {exc}", "model") from None


def _check_content(content: Any, param: str) -> None:
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid(f"'{param}' must be a string, an array of parts or null.", param)
    if not all(isinstance(part, dict) for part in content):
        raise _invalid(f"Every part of '{param}' must be an object.", param)


def _messages(messages: Any) -> list[Message]:
    if not isinstance(messages, list) or not messages:
        raise _invalid("'messages' must be a non-empty array.", "messages")
    for index, message in enumerate(messages):
        param = f"messages.[{index}]"
        if not isinstance(message, dict):
            raise _invalid(f"'{param}' must be an object.", param)
        if not isinstance(message.get("role"), str):
            raise _invalid(f"'{param}.role' must be a string.", f"{param}.role")
        _check_content(message.get("content"), f"{param}.content")
    return messages


def _streaming(body: dict[str, Any]) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise _invalid("'stream' must be a boolean.", "stream")
    options = body.get("stream_options")
    if options is None:
        return bool(stream), False
    if not isinstance(options, dict):
        raise _invalid("'stream_options' must be an object.", "stream_options")
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise _invalid("'include_usage' must be a boolean.", "stream_options.include_usage")
    return bool(stream), include_usage


def _max_tokens(body: dict[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _invalid(f"'{name}' must be an integer of at least 1.", name)
        return value
    return None


def parse_request(raw: bytes) -> ChatRequest:
    """Validate a raw request body; raise `ApiError` (400 or 404) when it is not usable."""
    body = _load(raw)
    if "model" not in body:
        raise _invalid("You must provide a model parameter.", "model")
    knobs = _knobs(body["model"])
    messages = _messages(body.get("messages"))
    stream, include_usage = _streaming(body)
    return ChatRequest(
        body, body["model"], knobs, messages, stream, include_usage, _max_tokens(body)
    )
