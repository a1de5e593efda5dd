"""The jobs a worker process is running now: their handles, and their delta writers."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import requests

CANCELLED = "cancelled"
LOST = "lost"
TIMEOUT = "timeout"


class Handle:
    """One running job: lets the monitor abort it from outside, at once."""

    def __init__(self, job_id: str, run_id: str, deadline: float) -> None:
        self.job_id = job_id
        self.run_id = run_id
        self.deadline = deadline
        self.abort_reason = ""
        self._woken = threading.Event()
        self._response: requests.Response | None = None

    def abort(self, reason: str) -> None:
        """Stop the job: wake its backoff sleep and cut its upstream connection."""
        if not self.abort_reason:
            self.abort_reason = reason
        self._woken.set()
        response = self._response
        if response is None:
            return
        conn = getattr(response.raw, "connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def attach(self, response: requests.Response | None) -> None:
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
