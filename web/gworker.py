"""The web's gunicorn worker: gunicorn's gevent worker, except that a stopping process closes
its idle keep-alive connections at once instead of holding them for the whole grace period,
that it starts faster (chatq/gevent_patch.py), and that a response's headers and first body
bytes leave in one send (web/onesend.py)."""

from __future__ import annotations

from types import FrameType, TracebackType
from typing import Any

import gevent
from gunicorn.workers.ggevent import GeventWorker

from chatq import gevent_patch
from web import onesend


class IdleClosingGeventWorker(GeventWorker):  # type: ignore[misc]
    """On SIGTERM, connections waiting for their next request are closed (a client resends on
    a new connection, to a process that is not stopping); requests in progress run on."""

    def init_process(self) -> None:
        """Start with no connection waiting; responses in one send each (web/onesend.py)."""
        self.idle: set[gevent.Greenlet] = set()
        onesend.install()
        super().init_process()

    def patch(self) -> None:
        """gunicorn's monkey-patching, gevent's plugins looked up once; no spawning trees."""
        gevent_patch.without_spawn_tree()
        with gevent_patch.entry_points_read_once():
            super().patch()

    def timeout_ctx(self) -> _WaitForRequest:
        """What gunicorn's keep-alive loop waits for each next request in."""
        return _WaitForRequest(self)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Stop accepting, as gunicorn does, and close the connections that wait."""
        super().handle_exit(sig, frame)
        gevent.spawn(self.close_idle)  # outside the signal handler

    def close_idle(self) -> None:
        """End every wait for a next request: gunicorn closes the connection, quietly."""
        gevent.killall(list(self.idle), StopIteration, block=False)


class _WaitForRequest:
    """gunicorn's keep-alive timeout, around a wait the worker can end when it stops."""

    def __init__(self, worker: IdleClosingGeventWorker) -> None:
        self.worker = worker
        self.timeout = gevent.Timeout(worker.cfg.keepalive, False)

    def __enter__(self) -> None:
        if not self.worker.alive:
            # gunicorn's loop ends the connection on StopIteration, with no error answer.
            raise StopIteration("the process is stopping")
        self.timeout.__enter__()
        self.worker.idle.add(gevent.getcurrent())

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        self.worker.idle.discard(gevent.getcurrent())
        return self.timeout.__exit__(kind, error, tb)
