"""The batch loop: in every worker process, a thread that moves the unfinished batches on.

Each tick it takes (or renews) the lease of each unfinished batch it can and runs that
batch's next step: validate the input file, feed lines into the `batch` lane, settle the
lines that ended, stop the lines of a cancelled or expired batch, write the files. A lease
runs out CHATQ_LEASE seconds after its holder last renewed it, so a worker that dies hands
its batches to another within seconds; every step may be run again from the start without
doing anything twice. The relay (worker/relay.py) accounts each line's end as it happens.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from typing import cast

from chatq import batches, keys, queue_stats
from chatq.batch_lines import CANCELLED_CODE, EXPIRED_CODE
from chatq.batches import BatchStore
from chatq.files import DirectoryStorage, storage_for
from chatq.files_meta import FileIndex
from chatq.outbox import Ended
from chatq.redis_conn import is_backend_error
from worker import relay
from worker.batch_feed import feed, validate
from worker.batch_finalize import finalize
from worker.batch_settle import settle, skip_unfed
from worker.batch_turn import Turn, account_job
from worker.context import WorkerContext

log = logging.getLogger(__name__)
TICK_S = 0.5
SETTLE_EVERY_S = 2.0
JANITOR_EVERY_S = 60.0
STALE_UPLOAD_S = 86400.0


class BatchLoop:
    """One thread per worker process (a greenlet under gevent); see the module docstring."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.batches = BatchStore(ctx.store.redis, ctx.settings.files_ttl_s)
        self.files = FileIndex(ctx.store.redis)
        self.storage: DirectoryStorage = storage_for(ctx.settings.files_dir)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._settled: dict[str, float] = {}
        self._janitor_at = 0.0
        self._stop = threading.Event()

    def start(self) -> None:
        """Start the loop."""
        threading.Thread(target=self._run, name="chatq-batches", daemon=True).start()

    def stop(self) -> None:
        """Stop after the current step."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.tick()
            except Exception as exc:
                if not is_backend_error(exc):
                    log.exception("batch loop tick failed")

    def tick(self) -> None:
        """One pass over the unfinished batches, then the expired files when due."""
        active = cast(set[str], self.ctx.store.redis.smembers(keys.batches_active()))
        for batch_id in sorted(active):
            if self._stop.is_set():
                return
            if self.batches.lease(batch_id, self.token, self.ctx.settings.lease_s):
                self._turn(batch_id)
        if time.monotonic() >= self._janitor_at:
            self._janitor_at = time.monotonic() + JANITOR_EVERY_S
            self.sweep_files()

    def _turn(self, batch_id: str) -> None:
        record = self.batches.get(batch_id)
        if record is None or record.get("status") in batches.ENDED:
            self.ctx.store.redis.srem(keys.batches_active(), batch_id)
            return
        turn = Turn(self.ctx, self.batches, self.storage, self.token, record)
        try:
            self.step(turn)
        except FileNotFoundError:
            log.error("batch %s: its input file's bytes are gone; it fails", batch_id)
            finalize(turn, batches.FAILED)

    def step(self, turn: Turn) -> None:
        """The next step of one batch, by its state."""
        record = turn.record
        status, ending = record["status"], record.get("ending", "")
        if record.get("validated") != "1":
            validate(turn)
        elif status == batches.VALIDATING:  # validated, and not one line can run
            finalize(turn, batches.FAILED)
        elif ending:
            self._wind_down(turn, ending)
        elif status == batches.IN_PROGRESS:
            self._run_lines(turn)
        elif status == batches.FINALIZING:
            finalize(turn, batches.COMPLETED)

    def _run_lines(self, turn: Turn) -> None:
        now = queue_stats.redis_time(self.ctx.store.redis)
        if now >= float(turn.record["expires_at"]):
            turn.batches.advance(turn.batch_id, turn.token, "expire")
            return
        feed(turn)
        if time.monotonic() - self._settled.get(turn.batch_id, 0.0) >= SETTLE_EVERY_S:
            self._settled[turn.batch_id] = time.monotonic()
            settle(turn)
        if turn.batches.advance(turn.batch_id, turn.token, "finalize") == batches.FINALIZING:
            finalize(turn, batches.COMPLETED)

    def _wind_down(self, turn: Turn, ending: str) -> None:
        """A cancelled or expired batch: no more feeding; unfinished lines stopped."""
        code = EXPIRED_CODE if ending == batches.EXPIRED else CANCELLED_CODE
        if not skip_unfed(turn, code):
            return
        settle(turn, "all" if ending == batches.EXPIRED else "queued")
        record = turn.reload()
        done = int(record.get("completed") or 0) + int(record.get("failed") or 0)
        if done >= int(record.get("total") or 0):
            finalize(turn, batches.EXPIRED if ending == batches.EXPIRED else batches.CANCELLED)

    def sweep_files(self) -> None:
        """Delete expired files (once a minute, by one worker), and stale partial uploads."""
        client = self.ctx.store.redis
        if not client.set(keys.batch_janitor(), self.token, nx=True, ex=int(JANITOR_EVERY_S)):
            return
        for file_id in self.files.due(queue_stats.redis_time(client)):
            if self.files.expire(file_id) == "deleted":
                self.storage.delete(file_id)
        self.storage.remove_stale_partials(STALE_UPLOAD_S)


_loops: list[BatchLoop] = []
_stores: dict[int, BatchStore] = {}


@relay.handler
def account_line(ctx: WorkerContext, ended: Ended) -> None:
    """A line job ended: put its result into its batch (other jobs are not ours)."""
    store = _stores.get(ctx.pid)
    if store is None:
        store = _stores[ctx.pid] = BatchStore(ctx.store.redis, ctx.settings.files_ttl_s)
    account_job(ctx.store.redis, store, ended.job_id, ctx.settings.job_ttl_s)


def start(ctx: WorkerContext) -> None:
    """Start this process's batch loop."""
    loop = BatchLoop(ctx)
    loop.start()
    _loops.append(loop)


def stop() -> None:
    """Stop this process's batch loop."""
    for loop in _loops:
        loop.stop()
