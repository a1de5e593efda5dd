"""OpenAI response objects: chat.completion, chat.completion.chunk events, model list."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from fakellm.knobs import MODEL_ID

DONE_EVENT = b"data: [DONE]\n\n"
_MODEL_CREATED = 1_700_000_000


@dataclass(frozen=True, slots=True)
class Reply:
    """What every object of one completion shares."""

    id: str
    created: int
    model: str
    include_usage: bool

    @classmethod
    def new(cls, model: str, include_usage: bool = False) -> Reply:
        """Start a reply with a fresh id and the current time."""
        return cls(f"chatcmpl-{secrets.token_hex(12)}", int(time.time()), model, include_usage)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """Return a usage object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_body(
    reply: Reply, content: str, token_usage: dict[str, int], finish_reason: str = "stop"
) -> bytes:
    """Serialise a non-streamed `chat.completion`."""
    message = {"role": "assistant", "content": content, "refusal": None}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    return _dumps(
        {
            "id": reply.id,
            "object": "chat.completion",
            "created": reply.created,
            "model": reply.model,
            "choices": [choice],
            "usage": token_usage,
        }
    )


class StreamEvents:
    """Serialises the server-sent events of one streamed completion."""

    def __init__(self, reply: Reply) -> None:
        self._reply = reply
        # Content chunks are the hot path: splice the JSON-escaped text into a fixed template.
        head, _, tail = self.delta({"content": None}).partition(b'"content":null')
        self._content_head = head + b'"content":'
        self._content_tail = tail

    def _event(self, choices: list[dict[str, Any]], token_usage: Any) -> bytes:
        chunk: dict[str, Any] = {
            "id": self._reply.id,
            "object": "chat.completion.chunk",
            "created": self._reply.created,
            "model": self._reply.model,
            "choices": choices,
        }
        if self._reply.include_usage:
            # OpenAI sends `"usage": null` on every chunk but the last when usage is asked for.
            chunk["usage"] = token_usage
        return b"data: " + _dumps(chunk) + b"\n\n"

    def delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        """Serialise a `chat.completion.chunk` event with one choice carrying `delta`."""
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return self._event([choice], None)

    def content(self, text: str) -> bytes:
        """Serialise a chunk event whose delta is `{"content": text}`."""
        return self._content_head + json.dumps(text).encode() + self._content_tail

    def usage(self, token_usage: dict[str, int]) -> bytes:
        """Serialise the last chunk of a stream with `include_usage`: no choices, only usage."""
        return self._event([], token_usage)


def model_list() -> bytes:
    """Serialise the `GET /v1/models` answer."""
    model = {"id": MODEL_ID, "object": "model", "created": _MODEL_CREATED, "owned_by": "fakellm"}
    return _dumps({"object": "list", "data": [model]})
