"""gunicorn's HTTP/1 response, its header block sent together with the first body bytes.

gunicorn sends a response's status line and headers with one `send()` and its body with
another. On loopback, and behind a proxy on the same host, each send runs the receiver's TCP
path too: for chatq's small answers (a job's JSON, a woken long-poll) the second send is a
large part of a request's cost. Here the header block waits for the body's first bytes and
leaves with them; a response that has none (HEAD, 204, an empty body) sends it when it
closes, and a streamed one (SSE) with its first event, exactly when gunicorn would have sent
the headers (on the first write).
"""

from __future__ import annotations

from typing import Any

from gunicorn import util
from gunicorn.http import wsgi


class _Held:
    """A stand-in socket that keeps what is sent to it."""

    def __init__(self) -> None:
        self.data = b""

    def sendall(self, data: bytes) -> None:
        self.data += data


class _Prefixed:
    """The client socket, `prefix` sent in front of the next bytes."""

    def __init__(self, sock: Any, prefix: bytes) -> None:
        self.sock, self.prefix = sock, prefix

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(self.prefix + data)


class OneSendResponse(wsgi.Response):  # type: ignore[misc]
    """A response whose header block goes out with its first body bytes, in one send."""

    _held = b""
    sock: Any

    def send_headers(self) -> None:
        """Build the header block as gunicorn does, and keep it."""
        if self.headers_sent:
            return
        sock, held = self.sock, _Held()
        self.sock = held
        try:
            super().send_headers()
        finally:
            self.sock = sock
        self._held = held.data

    def _emit_body(self, data: bytes) -> None:
        held, self._held = self._held, b""
        target = _Prefixed(self.sock, held) if held else self.sock
        util.write(target, data, self.chunked)

    def flush_headers(self) -> None:
        """Send the header block now, if it still waits."""
        held, self._held = self._held, b""
        if held:
            self.sock.sendall(held)

    def sendfile(self, respiter: Any) -> bool:
        """gunicorn's sendfile writes to the socket itself: the headers go first."""
        if self.cfg.is_ssl or not self.can_sendfile():
            return False
        self.send_headers()
        self.flush_headers()
        return bool(super().sendfile(respiter))

    def close(self) -> None:
        """A response without body bytes sends its headers here, before any last chunk."""
        self.send_headers()
        self.flush_headers()
        super().close()


def install() -> None:
    """Make gunicorn build HTTP/1 responses as OneSendResponse (in this process)."""
    wsgi.Response = OneSendResponse
