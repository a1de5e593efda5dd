"""gunicorn's own error answers (oversize headers, bad request lines) in OpenAI's shape."""

from __future__ import annotations

import json
import socket

_CODES = {
    400: "invalid_request",
    403: "forbidden",
    413: "request_too_large",
    414: "request_line_too_long",
    417: "expectation_failed",
    431: "request_header_fields_too_large",
}


def write_json_error(sock: socket.socket, status: int, reason: str, _detail: str) -> None:
    """Answer a request gunicorn refused before the app saw it; never echo what was sent."""
    error = {
        "message": f"{reason}.",
        "type": "invalid_request_error" if status < 500 else "server_error",
        "param": None,
        "code": _CODES.get(status, "internal_error" if status >= 500 else "invalid_request"),
    }
    body = json.dumps({"error": error}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body)


def install() -> None:
    """Make gunicorn's workers write their refusals with `write_json_error`."""
    from gunicorn import util

    util.write_error = write_json_error
