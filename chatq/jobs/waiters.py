"""The requests of one process parked on jobs, and how each is woken.

A parked request costs what its greenlet keeps (its saved stack, its frames and whatever they
hold) and the objects it waits with, and every full garbage collection walks them: so a waiter
is one small object, chained to the other waiters of its job, that parks on a hub waiter and a
timer in a gevent process.
"""

from __future__ import annotations

import threading
from typing import Any

from gevent import get_hub
from gevent.hub import Waiter as HubWaiter

from chatq.jobs import record as jobs
from chatq.jobs.events import Carried
from chatq.runtime import gevent_process

# Deltas a waiter keeps untaken (a stream writing to a slow client) before it reads the
# stream instead.
MAX_CARRIED = 64


class Waiter:
    """A request parked on one job; `terminal_only` waiters ignore non-final changes. Entered
    (`with`), it is registered until left. The others keep the deltas the notifications
    carried since they last took them (`carried`), None once a notification carried none:
    then they read the stream."""

    __slots__ = (
        "_event",
        "_hub_waiter",
        "_registry",
        "carried",
        "job_id",
        "next",
        "snapshot",
        "terminal_only",
        "woken",
    )

    def __init__(self, registry: Waiters, job_id: str, terminal_only: bool) -> None:
        self._registry = registry
        self.job_id = job_id
        self.terminal_only = terminal_only
        self.snapshot = ""
        self.next: Waiter | None = None  # the job's next waiter
        self.woken = False
        self.carried: list[Carried] | None = None
        self._hub_waiter: Any = None
        # Between native threads (the app outside gevent: in-process tests), an Event. A
        # gevent Event's timed wait would build a Timeout and a list of links besides, and
        # leave a stack deeper by 0.7 KB for each parked request to keep.
        self._event = None if registry.greenlets else threading.Event()

    @property
    def event(self) -> threading.Event | None:
        """The Event a wait blocks on between native threads; None under gevent."""
        return self._event

    def __enter__(self) -> Waiter:
        self._registry.add(self)
        return self

    def __exit__(self, *_: object) -> None:
        self._registry.remove(self)

    def carry(self, carried: Carried | None) -> None:
        """Keep the delta a notification carried; with none, the waiter reads the stream."""
        kept = self.carried
        if carried is None or (kept is not None and len(kept) >= MAX_CARRIED):
            self.carried = None
        elif kept is None:
            self.carried = [carried]
        else:
            kept.append(carried)

    def wait(self, timeout_s: float) -> bool:
        """Block until woken or `timeout_s` passes; True when woken (since the last wait)."""
        if self._event is not None:
            woken = self._event.wait(timeout_s)
            self._event.clear()
            return woken
        if not self.woken:
            self._park(timeout_s)
        woken, self.woken = self.woken, False
        return woken

    def _park(self, timeout_s: float) -> None:
        hub = get_hub()
        waiter = self._hub_waiter = HubWaiter(hub)
        timer = hub.loop.timer(timeout_s)
        timer.start(waiter.switch, None)
        try:
            waiter.get()
        finally:
            timer.close()
            self._hub_waiter = None

    def wake(self) -> None:
        """End the wait, or the next one (from another greenlet, or thread outside gevent)."""
        if self._event is not None:
            self._event.set()
            return
        self.woken = True
        waiter = self._hub_waiter
        if waiter is not None:
            # Only the hub switches to a hub waiter; one whose wait has ended by then (its
            # timer fired first) keeps the value unread.
            get_hub().loop.run_callback(waiter.switch, None)


class Waiters:
    """Every waiter of a process, by job: the first of each, the others chained to it."""

    def __init__(self) -> None:
        self._first: dict[str, Waiter] = {}
        self._lock = threading.Lock()
        # Whether waiters are greenlets of one thread (a gevent process), woken through the
        # hub, or native threads.
        self.greenlets = gevent_process()

    def add(self, waiter: Waiter) -> None:
        """Register `waiter` (entering it)."""
        with self._lock:
            waiter.next = self._first.get(waiter.job_id)
            self._first[waiter.job_id] = waiter

    def remove(self, waiter: Waiter) -> None:
        """Unregister `waiter` (leaving it)."""
        with self._lock:
            before = self._first.get(waiter.job_id)
            if before is waiter:
                if waiter.next is None:
                    del self._first[waiter.job_id]
                else:
                    self._first[waiter.job_id] = waiter.next
            else:
                while before is not None and before.next is not waiter:
                    before = before.next
                if before is not None:
                    before.next = waiter.next
            waiter.next = None

    def count(self) -> int:
        """How many requests are parked now."""
        with self._lock:
            return sum(len(self._of(job_id)) for job_id in self._first)

    def _of(self, job_id: str) -> list[Waiter]:
        """The waiters of `job_id` (with the lock held)."""
        found, waiter = [], self._first.get(job_id)
        while waiter is not None:
            found.append(waiter)
            waiter = waiter.next
        return found

    def wake(
        self, job_id: str, status: str, snapshot: str = "", carried: Carried | None = None
    ) -> None:
        """Wake the waiters of `job_id` that care about a change to `status`; `carried`: the
        one new delta, when the notification carries it."""
        final = jobs.is_terminal(status)
        with self._lock:
            group = self._of(job_id)
        for waiter in group:
            if final or not waiter.terminal_only:
                waiter.snapshot = snapshot or waiter.snapshot
                waiter.carry(carried)
                waiter.wake()

    def wake_all(self) -> None:
        """Wake every waiter so it re-reads: used when notifications may have been missed."""
        with self._lock:
            group = [waiter for job_id in self._first for waiter in self._of(job_id)]
        for waiter in group:
            waiter.carried = None
            waiter.wake()
