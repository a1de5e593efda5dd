"""A request body the application did not read closes its connection instead of being drained.

To reuse a keep-alive connection gunicorn first reads and discards what is left of the last
request's body. On loopback, or from any fast sender, that data is always ready, so gevent's
socket reads never switch to another greenlet: a 100 MB body sent with no key (answered `401`
before a byte of it is read), to a path that takes no body (`405`), or over a size limit
(`413`) froze the whole process for seconds. Here a response whose request still has more
than a few kilobytes of body to come says `Connection: close` and the connection ends after
it, unread; the client opens a new one for its next request, as it would after any error.
Closing rather than draining cooperatively: a drain, even one that yields, spends the
process's CPU on bytes nobody wants, for as long as the client cares to send them.
"""

from __future__ import annotations

from typing import Any

from gunicorn.http import body, wsgi

from web.server.onesend import OneSendResponse

# What gunicorn still drains (its own cap for a drain with a deadline): a small body's rest is
# most likely already in the socket's buffer, and keeping its connection saves a new one.
DRAIN_MAX_BYTES = 64 * 1024


def unread_bytes(request_body: Any) -> int | None:
    """Bytes of the request body not read yet, or None when unknown (chunked, not ended)."""
    reader = request_body.reader
    if isinstance(reader, body.LengthReader):
        return int(reader.length)
    if isinstance(reader, body.ChunkedReader) and reader.parser is None:
        return 0
    return None


class UnreadClosingResponse(OneSendResponse):
    """A response that closes its connection when the request's body was left unread."""

    def should_close(self) -> bool:
        """gunicorn asks this for the `Connection` header and again after the response."""
        if not self.must_close:
            left = unread_bytes(self.req.body)
            if left is None or left > DRAIN_MAX_BYTES:
                self.force_close()
        return bool(super().should_close())


def install() -> None:
    """Make gunicorn build HTTP/1 responses as UnreadClosingResponse (in this process)."""
    wsgi.Response = UnreadClosingResponse
