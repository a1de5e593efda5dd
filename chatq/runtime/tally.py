"""A count that threads (greenlets under gevent) add to at once: how often this process did
something, read by the tests that show a piece of work is done once (a prompt counted, a batch
line parsed)."""

from __future__ import annotations

import threading


class Tally:
    """A count of events in this process."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        """One more."""
        with self._lock:
            self.count += 1
