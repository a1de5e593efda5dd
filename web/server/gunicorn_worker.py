"""The web's gunicorn worker: gunicorn's gevent worker, except that a stopping process closes its
idle keep-alive connections at once instead of holding them for the whole grace period, that a
request's headers must arrive within CHATQ_HEADER_TIMEOUT, that it starts faster
(chatq/gevent_patch.py), that a response's headers and first body bytes leave in one send
(web/server/onesend.py), and that a body left unread closes its connection
(web/server/unread.py)."""

from __future__ import annotations

from types import FrameType, TracebackType
from typing import Any

import gevent
from gunicorn.http import parser
from gunicorn.workers.ggevent import GeventWorker

from chatq import gevent_patch
from web.server import unread

# The connections waiting for their next request's headers, by the greenlet serving each
# (one gunicorn worker per process).
WAITING: dict[gevent.Greenlet, _WaitForRequest] = {}


class IdleClosingGeventWorker(GeventWorker):  # type: ignore[misc]
    """On SIGTERM, connections waiting for their next request are closed (a client resends on
    a new connection, to a process that is not stopping); requests in progress run on. A
    request's headers must arrive within `header_timeout_s` of its first byte (of the
    connection's opening, for its first request)."""

    header_timeout_s: float = 10.0

    def init_process(self) -> None:
        """Start with no connection waiting; the HTTP/1 parts above installed."""
        self.fresh: set[gevent.Greenlet] = set()
        unread.install()
        parser.SocketUnreader = _HeaderTimedUnreader
        super().init_process()

    def patch(self) -> None:
        """gunicorn's monkey-patching, gevent's plugins looked up once; no spawning trees."""
        gevent_patch.without_spawn_tree()
        with gevent_patch.entry_points_read_once():
            super().patch()

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        """Serve one connection, its first request's headers due from its opening."""
        me = gevent.getcurrent()
        self.fresh.add(me)
        try:
            super().handle(listener, client, addr)
        finally:
            self.fresh.discard(me)

    def timeout_ctx(self) -> _WaitForRequest:
        """What gunicorn's keep-alive loop waits for (and reads) each next request in."""
        return _WaitForRequest(self)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Stop accepting, as gunicorn does, and close the connections that wait."""
        super().handle_exit(sig, frame)
        gevent.spawn(self.close_idle)  # outside the signal handler

    def close_idle(self) -> None:
        """End every wait for a next request: gunicorn closes the connection, quietly."""
        gevent.killall(list(WAITING), StopIteration, block=False)


def worker_class(header_timeout_s: float) -> type[IdleClosingGeventWorker]:
    """The worker class, with chatq's settings that gunicorn has no option for."""
    return type(
        "ChatqGeventWorker", (IdleClosingGeventWorker,), {"header_timeout_s": header_timeout_s}
    )


class _WaitForRequest:
    """gunicorn's keep-alive timeout until a request's first bytes, then the header timeout,
    around a wait the worker can end when it stops. Expired, gunicorn closes the connection
    (no request was made: nothing is answered)."""

    def __init__(self, worker: IdleClosingGeventWorker) -> None:
        self.worker = worker
        self.headers_due = gevent.getcurrent() in worker.fresh
        worker.fresh.discard(gevent.getcurrent())
        seconds = worker.header_timeout_s if self.headers_due else worker.cfg.keepalive
        self.timeout = gevent.Timeout(seconds, False)

    def __enter__(self) -> None:
        if not self.worker.alive:
            # gunicorn's loop ends the connection on StopIteration, with no error answer.
            raise StopIteration("the process is stopping")
        self.timeout.__enter__()
        WAITING[gevent.getcurrent()] = self

    def bytes_arrived(self) -> None:
        """The request has begun: its headers are due within the header timeout."""
        if not self.headers_due:
            self.headers_due = True
            self.timeout.close()  # a gevent timer's interval is set when it is made
            self.timeout = gevent.Timeout(self.worker.header_timeout_s, False)
            self.timeout.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        WAITING.pop(gevent.getcurrent(), None)
        return self.timeout.__exit__(kind, error, tb)


class _HeaderTimedUnreader(parser.SocketUnreader):  # type: ignore[misc]
    """gunicorn's socket reader, telling the wait for a request when its bytes arrive."""

    def chunk(self, size_hint: int | None = None) -> bytes:
        """One read from the socket."""
        data: bytes = super().chunk(size_hint)
        wait = WAITING.get(gevent.getcurrent())
        if wait is not None and data:
            wait.bytes_arrived()
        return data
