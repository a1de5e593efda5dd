"""Reading an upstream's Server-Sent Events and rebuilding the chat.completion they carry."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

JSONDict = dict[str, Any]


def sse_data(chunks: Iterable[bytes]) -> Iterator[str]:
    """The `data` of each event in a byte stream of Server-Sent Events."""
    buffer = b""
    data: list[str] = []
    for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8")
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)


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
            int(call.get("index", len(self.tool_calls))),
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
        message: JSONDict = {
            "role": self.role,
            "content": "".join(self.content) if self.content or not self.tool_calls else None,
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
        """Take one chunk; answer the new text of the first choice."""
        for name in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if chunk.get(name) is not None:
                self.header.setdefault(name, chunk[name])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        text = ""
        for choice in chunk.get("choices") or []:
            index = int(choice.get("index", 0))
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
