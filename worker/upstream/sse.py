"""Reading an upstream's Server-Sent Events and rebuilding the chat.completion they carry."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

JSONDict = dict[str, Any]


class InvalidChunk(ValueError):
    """The upstream streamed something that is not a well-shaped `chat.completion.chunk`."""


def sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """The `data` of each event in a byte stream of Server-Sent Events."""
    buffer = b""
    data: list[str] = []
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = _decode(raw.rstrip(b"\r"))
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)


def _decode(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidChunk("the stream is not UTF-8") from None


def _no_constant(name: str) -> Any:
    raise InvalidChunk(f"an event holds {name}, which is not JSON")


# One decoder for every event: json.loads with an option builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def parse_event(data: str) -> JSONDict:
    """One event's data as a JSON object, or InvalidChunk."""
    try:
        event = _DECODER.decode(data)
    except json.JSONDecodeError as exc:
        raise InvalidChunk(f"an event is not JSON ({exc.msg})") from None
    if not isinstance(event, dict):
        raise InvalidChunk("an event is not a JSON object")
    return event


def _expect(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise InvalidChunk(f"{where} is not {what}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_or_null(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _is_list_of_objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def check_chunk(chunk: JSONDict) -> None:
    """Raise InvalidChunk unless every field chatq reads has the type OpenAI gives it.

    Lenient where real upstreams differ harmlessly: absent fields, nulls, unknown fields.
    """
    choices = chunk.get("choices")
    _expect(choices is None or _is_list_of_objects(choices), "choices", "a list of objects")
    _check_usage(chunk.get("usage"))
    for i, choice in enumerate(choices or []):
        _check_choice(choice, f"choices[{i}]")


def _check_usage(usage: Any) -> None:
    _expect(usage is None or isinstance(usage, dict), "usage", "an object or null")
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        count = (usage or {}).get(name)
        _expect(count is None or _is_int(count), f"usage.{name}", "an integer")


def _check_choice(choice: JSONDict, where: str) -> None:
    index = choice.get("index", 0)
    _expect(_is_int(index) and index >= 0, f"{where}.index", "a non-negative integer")
    delta = choice.get("delta")
    _expect(delta is None or isinstance(delta, dict), f"{where}.delta", "an object")
    _expect(
        _is_str_or_null(choice.get("finish_reason")), f"{where}.finish_reason", "a string or null"
    )
    _check_logprobs(choice.get("logprobs"), f"{where}.logprobs")
    if delta:
        _check_delta(delta, f"{where}.delta")


def _check_logprobs(logprobs: Any, where: str) -> None:
    _expect(logprobs is None or isinstance(logprobs, dict), where, "an object or null")
    for part in ("content", "refusal"):
        tokens = (logprobs or {}).get(part)
        _expect(
            tokens is None or _is_list_of_objects(tokens),
            f"{where}.{part}",
            "a list of objects or null",
        )


def _check_delta(delta: JSONDict, where: str) -> None:
    for name in ("role", "content", "refusal"):
        _expect(_is_str_or_null(delta.get(name)), f"{where}.{name}", "a string or null")
    calls = delta.get("tool_calls")
    _expect(calls is None or _is_list_of_objects(calls), f"{where}.tool_calls", "a list of objects")
    for i, call in enumerate(calls or []):
        _check_tool_call(call, f"{where}.tool_calls[{i}]")


def _check_tool_call(call: JSONDict, where: str) -> None:
    index = call.get("index", 0)
    _expect(_is_int(index) and index >= 0, f"{where}.index", "a non-negative integer")
    for name in ("id", "type"):
        _expect(_is_str_or_null(call.get(name)), f"{where}.{name}", "a string or null")
    function = call.get("function")
    _expect(function is None or isinstance(function, dict), f"{where}.function", "an object")
    for name in ("name", "arguments"):
        _expect(
            _is_str_or_null((function or {}).get(name)),
            f"{where}.function.{name}",
            "a string or null",
        )


class _Choice:
    """One choice being assembled from its deltas."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.role = "assistant"
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls: dict[int, JSONDict] = {}
        self.logprobs: JSONDict | None = None
        self.finish_reason: str | None = None

    def add(self, choice: JSONDict) -> str:
        delta = choice.get("delta") or {}
        self.role = delta.get("role") or self.role
        text = delta.get("content") or ""
        if text:
            self.content.append(text)
        if delta.get("refusal"):
            self.refusal.append(delta["refusal"])
        for call in delta.get("tool_calls") or []:
            self._add_tool_call(call)
        self._add_logprobs(choice.get("logprobs"))
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return str(text)

    def _add_tool_call(self, call: JSONDict) -> None:
        slot = self.tool_calls.setdefault(
            call.get("index", len(self.tool_calls)),
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        slot["id"] = call.get("id") or slot["id"]
        slot["type"] = call.get("type") or slot["type"]
        function = call.get("function") or {}
        slot["function"]["name"] += function.get("name") or ""
        slot["function"]["arguments"] += function.get("arguments") or ""

    def _add_logprobs(self, logprobs: JSONDict | None) -> None:
        if not logprobs:
            return
        merged = self.logprobs or {"content": None, "refusal": None}
        for part in ("content", "refusal"):
            if logprobs.get(part):
                merged[part] = (merged[part] or []) + logprobs[part]
        self.logprobs = merged

    def message(self) -> JSONDict:
        # As OpenAI answers: content null when the model only called tools or refused.
        only_other = not self.content and (self.tool_calls or self.refusal)
        message: JSONDict = {
            "role": self.role,
            "content": None if only_other else "".join(self.content),
            "refusal": "".join(self.refusal) if self.refusal else None,
        }
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        return message

    def result(self) -> JSONDict:
        return {
            "index": self.index,
            "message": self.message(),
            "logprobs": self.logprobs,
            "finish_reason": self.finish_reason,
        }


class CompletionBuilder:
    """Accumulates `chat.completion.chunk`s into the `chat.completion` they stand for."""

    def __init__(self) -> None:
        self.header: JSONDict = {}
        self.usage: JSONDict | None = None
        self.choices: dict[int, _Choice] = {}

    def add(self, chunk: JSONDict) -> str:
        """Take one chunk; answer the new text of the first choice. InvalidChunk if misshapen."""
        check_chunk(chunk)
        for name in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if chunk.get(name) is not None:
                self.header.setdefault(name, chunk[name])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        text = ""
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            slot = self.choices.setdefault(index, _Choice(index))
            added = slot.add(choice)
            if index == 0:
                text = added
        return text

    @property
    def finished(self) -> bool:
        """Whether every choice has its finish_reason."""
        return bool(self.choices) and all(c.finish_reason for c in self.choices.values())

    def completion(self) -> JSONDict:
        """The assembled chat.completion object."""
        body: JSONDict = {
            "id": self.header.get("id", ""),
            "object": "chat.completion",
            "created": self.header.get("created", 0),
            "model": self.header.get("model", ""),
            "choices": [self.choices[i].result() for i in sorted(self.choices)],
        }
        for name in ("system_fingerprint", "service_tier"):
            if name in self.header:
                body[name] = self.header[name]
        if self.usage is not None:
            body["usage"] = self.usage
        return body

    @property
    def finish_reason(self) -> str:
        """The first choice's finish_reason, '' if none yet."""
        first = self.choices.get(0)
        return (first.finish_reason or "") if first else ""
