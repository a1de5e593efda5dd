"""The queue's depth as a submit sees it (the CHATQ_MAX_QUEUE_DEPTH cap): read at most
`max_age_s` ago, and never waited for while submits keep coming.

Each read is one or two round trips to the broker; made by the submit that finds the depth
stale, it lay on that request's way to its job (at a few submits a second, on nearly every
one). So the first submit after a quiet spell reads it itself and starts a reader that reads
it again every `max_age_s` for as long as submits keep asking (until `keep_s` after the last),
then stops: an idle process reads nothing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable

from chatq.broker import BrokerUnavailable
from chatq.topology import is_backend_error

log = logging.getLogger(__name__)


class QueueDepth:
    """`read` (the broker's total depth) kept at most `max_age_s` old while it is asked for."""

    def __init__(self, read: Callable[[], int], max_age_s: float, keep_s: float) -> None:
        self._read = read
        self.max_age_s = max_age_s
        self.keep_s = keep_s
        self._depth = 0
        self._read_at = -math.inf
        self._asked_at = -math.inf
        self._lock = threading.Lock()
        self._reading = False

    @property
    def reading(self) -> bool:
        """Whether a reader keeps the depth fresh now."""
        return self._reading

    def get(self) -> int:
        """The depth; read now only when no reader keeps it fresh (or it fell behind by a
        whole interval: a slow broker)."""
        now = time.monotonic()
        self._asked_at = now
        behind_s = 2 * self.max_age_s if self._reading else self.max_age_s
        if now - self._read_at >= behind_s:
            self._refresh()
            self._start_reader()
        return self._depth

    def _refresh(self) -> None:
        read_at = time.monotonic()
        # A broker of its own (RabbitMQ) away while the job store is not: the job is kept and
        # sent once the broker is back (the sweeper), so admit it on the depth last read
        # rather than refuse it.
        with contextlib.suppress(BrokerUnavailable):
            self._depth = self._read()
        self._read_at = read_at

    def _start_reader(self) -> None:
        with self._lock:
            if self._reading:
                return
            self._reading = True
        threading.Thread(target=self._keep_fresh, name="chatq-queue-depth", daemon=True).start()

    def _keep_fresh(self) -> None:
        try:
            while time.monotonic() - self._asked_at < self.keep_s:
                time.sleep(max(0.0, self._read_at + self.max_age_s - time.monotonic()))
                self._refresh()
        except Exception as exc:
            # The next submit reads it itself (and raises what the store raises there).
            if not is_backend_error(exc):
                log.exception("reading the queue depth failed")
        finally:
            with self._lock:
                self._reading = False
