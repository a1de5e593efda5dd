"""The batch loop: in every worker process, a thread that moves the unfinished batches on.

Each tick it takes (or renews) the lease of each unfinished batch it can, reads every
unfinished batch's record, works out how many lines each may feed now (its share of
CHATQ_BATCH_MAX_QUEUED, worker/batches/share.py), and runs the next step of each batch it
holds: validate the input file, feed its share of lines into the `batch` lane, settle the
lines that ended, stop the lines of a cancelled or expired batch, write the files. A lease
runs out CHATQ_LEASE seconds after its holder last renewed it, so a worker that dies hands
its batches to another within seconds; every step may be run again from the start without
doing anything twice. The relay (worker/run/relay.py) accounts each line's end as it happens.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from typing import cast

from chatq import batches, keys, metrics
from chatq.batches import (
    CANCELLED_CODE,
    EXPIRED_CODE,
    BatchStore,
    DirectoryStorage,
    FileIndex,
    storage_for,
)
from chatq.jobs import Ended
from chatq.topology import is_backend_error
from worker import run
from worker.batches import share as batch_share
from worker.batches.feed import FEED_CHUNK, feed
from worker.batches.finalize import finalize
from worker.batches.settle import settle, skip_unfed
from worker.batches.turn import Turn, account_job
from worker.batches.validate import validate
from worker.batches.waiting import WaitingLines
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
        self.waiting = WaitingLines()
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
        """One pass over the unfinished batches, then the expired files when due. Its Redis
        work grows with the batches, not their square: the leases in one call, every record
        in one round trip, the shares worked out once (worker/batches/share.py)."""
        client = self.ctx.store.redis
        ids = sorted(cast(set[str], client.smembers(keys.batches_active())))
        held = self.batches.lease_many(ids, self.token, self.ctx.settings.lease_s)
        leased_at = time.monotonic()
        active = batch_share.read_active(client, ids)
        if active.gone:
            client.srem(keys.batches_active(), *active.gone)
        lines = batch_share.shares(active.records, self.ctx.settings, active.now_s)
        mine = {batch_id for batch_id, h in zip(ids, held, strict=True) if h}
        self._settled = {b: t for b, t in self._settled.items() if b in mine}
        self.waiting.keep_only({r["id"] for r in active.records if _feeds(r) and r["id"] in mine})
        for record in active.records:
            if self._stop.is_set():
                return
            if record["id"] in mine:
                self._turn(record, leased_at, lines.get(record["id"], 0), active.now_s)
        if time.monotonic() >= self._janitor_at:
            self._janitor_at = time.monotonic() + JANITOR_EVERY_S
            self.sweep_files()

    def _turn(self, record: dict[str, str], leased_at: float, lines: int, now_s: float) -> None:
        turn = Turn(
            self.ctx, self.batches, self.storage, self.token, record, leased_at, self.waiting
        )
        if turn.record["status"] in batches.ENDED:
            self.ctx.store.redis.srem(keys.batches_active(), turn.batch_id)
            return
        try:
            self.step(turn, lines, now_s)
        except FileNotFoundError:
            log.error("batch %s: its input file's bytes are gone; it fails", turn.batch_id)
            finalize(turn, batches.FAILED)

    def step(self, turn: Turn, lines: int, now_s: float) -> None:
        """The next step of one batch, by its state; `lines`: how many it may feed now,
        `now_s`: Redis's time at the start of this tick."""
        record = turn.record
        status, ending = record["status"], record.get("ending", "")
        if record.get("validated") != "1":
            validate(turn)
        elif status == batches.VALIDATING:  # validated, and not one line can run
            finalize(turn, batches.FAILED)
        elif ending:
            self._wind_down(turn, ending)
        elif status == batches.IN_PROGRESS:
            self._run_lines(turn, lines, now_s)
        elif status == batches.FINALIZING:
            finalize(turn, batches.COMPLETED)

    def _run_lines(self, turn: Turn, lines: int, now_s: float) -> None:
        if now_s >= float(turn.record["expires_at"]):
            turn.batches.advance(turn.batch_id, turn.token, "expire")
            return
        progress = batches.progress(turn.record)
        if lines:
            feed(turn, lines)
        elif turn.record.get("feed_done") != "1" and not progress.waiting_in_file:
            feed(turn, FEED_CHUNK)  # only lines not to run are left: read on to the end
        due = time.monotonic() - self._settled.get(turn.batch_id, 0.0) >= SETTLE_EVERY_S
        if due and progress.fed:
            self._settled[turn.batch_id] = time.monotonic()
            settle(turn)
        record = turn.record
        done = int(record.get("completed") or 0) + int(record.get("failed") or 0)
        if record.get("feed_done") != "1" or done < int(record.get("total") or 0):
            return  # not all accounted: no need to ask the script
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
        for file_id in self.files.due(metrics.redis_time(client)):
            if self.files.expire(file_id) == "deleted":
                self.storage.delete(file_id)
        self.storage.remove_stale_partials(STALE_UPLOAD_S)


def _feeds(record: dict[str, str]) -> bool:
    """Whether the batch may still feed lines (its waiting line, if any, is kept)."""
    return record.get("status") == batches.IN_PROGRESS and not record.get("ending")


_loops: list[BatchLoop] = []
_stores: dict[int, BatchStore] = {}


@run.handler
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
