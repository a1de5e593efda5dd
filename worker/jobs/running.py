"""The jobs a worker process is running now: their handles, and their delta writers."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from urllib3.response import BaseHTTPResponse

CANCELLED = "cancelled"
LOST = "lost"
TIMEOUT = "timeout"

# The job whose upstream call this thread makes (a greenlet's own under gevent, whose
# monkey-patching makes threading.local greenlet-local): how a connection finds its job.
_calling = threading.local()


def _shut_down(sock: socket.socket | None) -> None:
    """Cut a connection at once: a thread blocked reading it wakes to an end of stream."""
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def calling_handle() -> Handle | None:
    """The handle of the job whose upstream call this thread (or greenlet) is making."""
    handle: Handle | None = getattr(_calling, "handle", None)
    return handle


class Handle:
    """One running job: lets the monitor abort it from outside, at once."""

    def __init__(self, job_id: str, run_id: str, deadline: float) -> None:
        self.job_id = job_id
        self.run_id = run_id
        self.deadline = deadline
        self.abort_reason = ""
        self._woken = threading.Event()
        self._response: BaseHTTPResponse | None = None
        # The connection of a call that has no answer yet (an HTTPConnection of urllib3's).
        self._waiting: Any = None

    def abort(self, reason: str) -> None:
        """Stop the job: wake its backoff sleep and cut its upstream connection, whether the
        call still waits for its first byte or reads the answer."""
        if not self.abort_reason:
            self.abort_reason = reason
        self._woken.set()
        # The reason is set before either is looked at, and each is set before the reason is
        # looked at (sending, attach): a call is cut by one side or the other, never missed.
        _shut_down(getattr(self._waiting, "sock", None))
        response = self._response
        if response is not None:
            _shut_down(getattr(response.connection, "sock", None))

    @contextlib.contextmanager
    def calling(self) -> Iterator[None]:
        """While in it, this thread's upstream call is this job's (see `sending`)."""
        _calling.handle = self
        try:
            yield
        finally:
            _calling.handle = None
            self._waiting = None

    def sending(self, connection: object) -> None:
        """The call's connection has connected, or is about to send: from now on abort cuts
        it. Raises ConnectionAbortedError when the job was stopped already."""
        self._waiting = connection
        if self.abort_reason:
            raise ConnectionAbortedError(f"job {self.job_id} was stopped")

    def answered(self) -> None:
        """The answer's headers have come (or the call failed): the connection belongs to the
        response now (`attach`), and goes back to the pool after it."""
        self._waiting = None

    def attach(self, response: BaseHTTPResponse | None) -> None:
        """Remember the response being read, so that abort can cut it."""
        self._response = response
        if response is not None and self.abort_reason:
            self.abort(self.abort_reason)

    def sleep(self, seconds: float) -> bool:
        """Sleep unless aborted; True if the whole time passed."""
        return not self._woken.wait(max(0.0, seconds))

    @property
    def remaining_s(self) -> float:
        """Seconds left before the job's deadline."""
        return self.deadline - time.monotonic()


class Registry:
    """The handles of the jobs running in this process."""

    def __init__(self) -> None:
        self._handles: dict[str, Handle] = {}
        self._lock = threading.Lock()

    def add(self, handle: Handle) -> None:
        """Track a job that has started."""
        with self._lock:
            self._handles[handle.job_id] = handle

    def remove(self, handle: Handle) -> None:
        """Stop tracking a job that has ended."""
        with self._lock:
            if self._handles.get(handle.job_id) is handle:
                del self._handles[handle.job_id]

    def snapshot(self) -> list[Handle]:
        """The handles running now."""
        with self._lock:
            return list(self._handles.values())
