"""The queue depth a submit checks against CHATQ_MAX_QUEUE_DEPTH (web/admission/depth.py): read
by the submit itself only when no reader keeps it fresh."""

from __future__ import annotations

import threading

from tests.procs import wait_until
from web.admission.depth import QueueDepth


class Reads:
    """A depth that grows by one at each read, and which thread read it."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def __call__(self) -> int:
        self.threads.append(threading.get_ident())
        return len(self.threads)


def test_only_the_first_submit_reads_the_depth_while_submits_keep_coming() -> None:
    reads = Reads()
    depth = QueueDepth(reads, max_age_s=0.2, keep_s=60)
    assert depth.get() == 1
    wait_until(lambda: depth.get() >= 3, 10, "the depth read again")
    me = threading.get_ident()
    assert reads.threads[0] == me
    assert me not in reads.threads[1:]


def test_a_reader_stops_once_nobody_asks_and_the_next_submit_reads_again() -> None:
    reads = Reads()
    depth = QueueDepth(reads, max_age_s=0.01, keep_s=0.05)
    depth.get()
    wait_until(lambda: not depth.reading, 10, "the reader stopping")
    wait_until(lambda: depth.get() and reads.threads[-1] == threading.get_ident(), 10, "a read")
    assert depth.reading  # and a reader runs again
