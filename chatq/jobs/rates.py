"""The counts behind /v1/queue's rates, in all and per key name: kept in each process, added
to Redis once a second.

A job's own scripts no longer count it (three commands a job); a process sends its counts in
one pipeline a second, only when it has some. What a process had not sent when it stopped is
lost: at most a second of its counts, in a window of one to two minutes.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import redis

from chatq import keys

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 1.0
KEEP_S = 300  # a minute's counts outlive the window that reads them (two minutes)
COUNTS = ("arrivals", "done", "busy_s")


def owner_field(name: str, owner: str) -> str:
    """The field of a minute's hash that holds count `name` of key name `owner`'s jobs (a key
    name holds no `:`, CHATQ_API_KEYS)."""
    return f"{name}:{owner}"


class Rates:
    """This process's counts not yet in Redis: jobs queued, runs ended and their seconds.

    With a `client`, a thread of the process (a greenlet under gevent), started at the first
    count, adds them to Redis every FLUSH_EVERY_S; without one they are only kept.
    """

    def __init__(self, client: redis.Redis | None = None) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._counts: dict[str, float] = {}
        self._flusher_pid = 0

    def _add(self, owner: str, **amounts: float) -> None:
        """Add to the totals, and to `owner`'s own counts when the job has one."""
        with self._lock:
            for name, amount in amounts.items():
                for field in (name, owner_field(name, owner)) if owner else (name,):
                    self._counts[field] = self._counts.get(field, 0) + amount
        self._start()

    def arrived(self, owner: str = "") -> None:
        """A job of key name `owner` was queued (not a cache hit, nor one following an
        identical job)."""
        self._add(owner, arrivals=1)

    def ran(self, busy_s: float, owner: str = "") -> None:
        """A worker's run of a job of `owner` ended after `busy_s` seconds in its slot."""
        self._add(owner, done=1, busy_s=busy_s)

    def _take(self) -> dict[str, float]:
        with self._lock:
            counts, self._counts = self._counts, {}
        return {name: amount for name, amount in counts.items() if amount}

    def flush(self) -> None:
        """Add the counts to this minute's in Redis (one round trip), if there are any."""
        counts = self._take()
        if not counts or self._client is None:
            return
        key = keys.stats(int(time.time() // 60))
        pipe = self._client.pipeline(transaction=False)
        for name, amount in counts.items():
            pipe.hincrbyfloat(key, name, amount)
        pipe.expire(key, KEEP_S)
        pipe.execute()

    def _start(self) -> None:
        # Once per process: a thread started before a fork (gunicorn's preload) is not in
        # the child.
        if self._client is None or self._flusher_pid == os.getpid():
            return
        with self._lock:
            if self._flusher_pid == os.getpid():
                return
            self._flusher_pid = os.getpid()
        threading.Thread(target=self._run, name="chatq-rates", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(FLUSH_EVERY_S)
            try:
                self.flush()
            except redis.RedisError as exc:
                # Rates are approximate: a second's counts lost beats a retry queue.
                log.debug("rates not flushed: %s", exc)
