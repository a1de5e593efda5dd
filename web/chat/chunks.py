"""OpenAI `chat.completion.chunk` objects built from a job's events."""

from __future__ import annotations

import json
from typing import Any

JSONDict = dict[str, Any]


class ChunkMaker:
    """Makes the chunks of one streamed answer, all with the same id, created and model."""

    def __init__(self, job_id: str, created: float, model: str) -> None:
        self.base = {
            "id": "chatcmpl-" + job_id.removeprefix("job_"),
            "object": "chat.completion.chunk",
            "created": int(created),
            "model": model,
        }

    def chunk(self, delta: JSONDict, finish_reason: str | None = None) -> JSONDict:
        """One chunk with one choice."""
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self.base, "choices": [choice]}

    def usage(self, usage: JSONDict | None) -> JSONDict:
        """The last chunk of `stream_options.include_usage`: no choices, the usage."""
        return {**self.base, "choices": [], "usage": usage}


def sse(payload: JSONDict | str) -> str:
    """One `data:` event."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n"


def tool_call_deltas(result: JSONDict | None) -> list[JSONDict]:
    """Deltas carrying the tool calls of a finished completion (text deltas carry none)."""
    if not result or not result.get("choices"):
        return []
    message = result["choices"][0].get("message") or {}
    deltas = []
    for index, call in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{**call, "index": index}]})
    return deltas
