"""A small upstream for the tests: `POST /v1/chat/completions` answers 200 with the Server-Sent
Events stream named by the model (`shape:NAME`, one of STREAMS), and counts calls per name.

Every stream but `ok` carries one event that is valid SSE but not a well-shaped
`chat.completion.chunk` (or not JSON, or not UTF-8); the rest of it is what OpenAI sends.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _chunk(choices: Any, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-shapes",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "shapes",
        "choices": choices,
        **extra,
    }


def _choice(delta: Any, **extra: Any) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None, **extra}


def _stream(*events: Any) -> bytes:
    """SSE bytes: dicts as JSON, bytes and str as they are, then `[DONE]`."""
    out = b""
    for event in events:
        if isinstance(event, dict):
            event = json.dumps(event)
        data = event if isinstance(event, bytes) else event.encode()
        out += b"data: " + data + b"\n\n"
    return out + b"data: [DONE]\n\n"


ROLE = _chunk([_choice({"role": "assistant", "content": ""})])
TEXT = _chunk([_choice({"content": "partial "})])
STOP = _chunk([_choice({}, finish_reason="stop")])


def _bad_delta(delta: Any) -> bytes:
    return _stream(ROLE, _chunk([_choice(delta)]), STOP)


def _bad_choice(**fields: Any) -> bytes:
    return _stream(ROLE, _chunk([_choice({"content": "x"}, **fields)]), STOP)


def _tool_call(**fields: Any) -> dict[str, Any]:
    return {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": ""},
        **fields,
    }


STREAMS: dict[str, bytes] = {
    "ok": _stream(ROLE, _chunk([_choice({"content": "fine"})]), STOP),
    # The four shapes of the audit.
    "index_null": _bad_choice(index=None),
    "choices_object": _stream(ROLE, _chunk(_choice({"content": "x"})), STOP),
    "tool_calls_strings": _bad_delta({"tool_calls": ["x"]}),
    "content_list": _bad_delta({"content": ["x"]}),
    # More of the same kind.
    "index_string": _bad_choice(index="0"),
    "index_true": _bad_choice(index=True),
    "delta_string": _bad_delta("x"),
    "refusal_number": _bad_delta({"refusal": 1}),
    "tool_call_function_string": _bad_delta({"tool_calls": [_tool_call(function="lookup")]}),
    "tool_call_arguments_object": _bad_delta(
        {"tool_calls": [_tool_call(function={"name": "lookup", "arguments": {"q": 1}})]}
    ),
    "tool_call_index_null": _bad_delta({"tool_calls": [_tool_call(index=None)]}),
    "logprobs_string": _bad_choice(logprobs="high"),
    "logprobs_content_object": _bad_choice(logprobs={"content": {"token": "x"}, "refusal": None}),
    "finish_reason_number": _stream(ROLE, _chunk([_choice({}, finish_reason=1)])),
    "usage_list": _stream(ROLE, TEXT, STOP, _chunk([], usage=[1, 2])),
    "usage_tokens_string": _stream(
        ROLE,
        TEXT,
        STOP,
        _chunk([], usage={"prompt_tokens": "many", "completion_tokens": 1, "total_tokens": 2}),
    ),
    "chunk_array": _stream(ROLE, "[1, 2]"),
    "not_json": _stream(ROLE, '{"choices": [<html>'),
    "not_utf8": _stream(ROLE, b'{"choices": "\xff\xfe"}'),
    "json_body": json.dumps(
        {"id": "chatcmpl-shapes", "object": "chat.completion", "choices": []}
    ).encode(),
    "html_page": b"<html><body>Service temporarily unavailable</body></html>",
    # Text already streamed (and written to the job) before the bad chunk.
    "after_text": _stream(ROLE, TEXT, _chunk([_choice({"content": ["late"]})]), STOP),
}


class ShapesUpstream:
    """The server, in a thread of this process; worker processes connect to `url`."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                name = str(request.get("model", "")).removeprefix("shape:")
                upstream.count(name)
                if name not in STREAMS:
                    self._send(
                        404,
                        "application/json",
                        b'{"error": {"message": "unknown shape", "type": "x"}}',
                    )
                    return
                self._send(200, "text/event-stream", STREAMS[name])

            def _send(self, status: int, content_type: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, name: str) -> None:
        """Record one call for the stream `name`."""
        with self._lock:
            self.calls[name] += 1

    def calls_to(self, name: str) -> int:
        """How many calls asked for the stream `name` so far."""
        with self._lock:
            return self.calls[name]

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()


BAD_SHAPES = sorted(name for name in STREAMS if name != "ok")
