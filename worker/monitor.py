"""The per-process monitor: renews leases, stops cancelled and overdue jobs, sweeps lost ones."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading

from chatq import celery_app, keys, queue_stats
from chatq.redis_conn import BACKEND_ERRORS
from worker import running
from worker.context import WorkerContext

log = logging.getLogger(__name__)

# Heartbeats this often, so a cancel stops a running job within a second.
TICK_S = 0.5
SWEEP_EVERY_TICKS = 2


class Monitor:
    """One thread per worker process; see the module docstring."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.tick_s = min(TICK_S, ctx.settings.lease_s / 4)
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the monitor thread (a greenlet under gevent)."""
        self._thread = threading.Thread(target=self._run, name="chatq-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end after its current tick, and leave the workers list."""
        self._stop.set()
        with contextlib.suppress(*BACKEND_ERRORS):
            self.ctx.store.redis.hdel(keys.workers(), self.name)

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(self.tick_s):
            ticks += 1
            try:
                self.heartbeat()
                if ticks % SWEEP_EVERY_TICKS == 0:
                    self.sweep()
            except BACKEND_ERRORS as exc:
                log.warning("monitor cannot reach Redis: %s", type(exc).__name__)
            except Exception:
                log.exception("monitor tick failed")

    def heartbeat(self) -> None:
        """Renew our leases; abort jobs that were cancelled, taken over or ran out of time."""
        handles = self.ctx.registry.snapshot()
        for handle in handles:
            if handle.remaining_s <= 0:
                handle.abort(running.TIMEOUT)
        runs = [(h.job_id, h.run_id) for h in handles]
        states = self.ctx.store.heartbeat(runs, self.ctx.settings.lease_s)
        queue_stats.report_worker(self.ctx.store.redis, self.name,
                                  self.ctx.settings.worker_concurrency, len(handles))
        for handle, state in zip(handles, states, strict=True):
            if state == "cancelled":
                handle.abort(running.CANCELLED)
            elif state != "in_progress":
                handle.abort(running.LOST)

    def sweep(self) -> None:
        """Requeue the jobs whose lease ran out: their worker died or never got the message."""
        s, store = self.ctx.settings, self.ctx.store
        for job_id in store.expired_leases():
            outcome = store.requeue_if_expired(job_id, s.lease_s, s.max_takeovers)
            if outcome not in ("requeued", "resend"):
                continue
            record = store.get(job_id) or {}
            priority = record.get("priority") or celery_app.QUEUES[0]
            celery_app.enqueue(self.ctx.celery, job_id, priority)
            store.mark_sent(job_id, s.queue_resend_s)
            log.warning("job %s %s after its lease ran out", job_id, outcome)
