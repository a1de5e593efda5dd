"""The per-process monitor: renews leases, stops cancelled and overdue jobs, sweeps lost ones."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time

from chatq import broker, keys, metrics
from chatq.jobs import LeaseState, SweepOutcome, Swept
from chatq.topology import BACKEND_ERRORS, is_backend_error
from worker import jobs
from worker.context import WorkerContext

log = logging.getLogger(__name__)

# Heartbeats this often, so a cancel stops a running job within a second.
TICK_S = 0.5
SWEEP_EVERY_TICKS = 2
# The swept jobs whose message is sent again (a queued one only if the broker lost it):
# how loud the line that says so is, and why.
_RESENT = {
    SweepOutcome.REQUEUED: (logging.WARNING, "its worker was lost"),
    SweepOutcome.QUEUED: (logging.WARNING, "message lost"),
    SweepOutcome.PARKED: (logging.INFO, "parked over its tenant's running cap"),
}


class Monitor:
    """One thread per worker process; see the module docstring."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.tick_s = min(TICK_S, ctx.settings.lease_s / 4)
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.broker = broker.make(ctx.settings, ctx.store.redis, ctx.celery)
        # Since when this process has reached Redis without a break (monotonic; 0: not now).
        self.connected_since = time.monotonic()
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
                metrics.flush()
                if not self.connected_since:
                    self.connected_since = time.monotonic()
                if ticks % SWEEP_EVERY_TICKS == 0 and self.trusts_leases():
                    self.sweep()
            except Exception as exc:
                if not is_backend_error(exc):
                    log.exception("monitor tick failed")
                    continue
                self.connected_since = 0.0
                log.warning("monitor cannot reach Redis: %s", type(exc).__name__)

    def trusts_leases(self) -> bool:
        """Whether a lease that ran out means its holder is gone.

        Not until this process has reached Redis for a whole lease without a break: after an
        outage every live worker first renews the leases that ran out while Redis was away.
        """
        held_s = time.monotonic() - self.connected_since
        return bool(self.connected_since) and held_s >= self.ctx.settings.lease_s

    def heartbeat(self) -> None:
        """Renew our leases; abort jobs that were cancelled, taken over or ran out of time."""
        handles = self.ctx.registry.snapshot()
        for handle in handles:
            if handle.remaining_s <= 0:
                handle.abort(jobs.TIMEOUT)
        states = self.ctx.store.heartbeat(
            runs=[(h.job_id, h.run_id) for h in handles],
            lease_s=self.ctx.settings.lease_s,
            worker=self.name,
            slots=self.ctx.settings.worker_concurrency,
        )
        for handle, state in zip(handles, states, strict=True):
            if state is LeaseState.CANCELLED:
                handle.abort(jobs.CANCELLED)
            elif state is LeaseState.LOST:
                handle.abort(jobs.LOST)

    def sweep(self) -> None:
        """Requeue the jobs whose worker was lost; resend the messages the broker lost, and
        those of parked jobs."""
        s = self.ctx.settings
        swept = self.ctx.store.sweep(
            lease_s=s.lease_s, resend_s=s.queue_resend_s, max_takeovers=s.max_takeovers
        )
        lost = set(self.broker.missing([j for j in swept if j.outcome is SweepOutcome.QUEUED]))
        for job in swept:
            if job.outcome is SweepOutcome.FAILED:
                log.warning("job %s failed: its worker was lost too many times", job.job_id)
            elif job.outcome in (SweepOutcome.REQUEUED, SweepOutcome.PARKED) or job.job_id in lost:
                self._send_again(job)

    def _send_again(self, job: Swept) -> None:
        # The job's trace goes with its message again (the record keeps it in any case).
        traceparent = self.ctx.store.redis.hget(keys.job(job.job_id), "traceparent") or ""
        broker.enqueue(
            self.ctx.celery,
            job.job_id,
            job.priority,
            state=self.ctx.store.redis,
            owner=job.owner,
            traceparent=str(traceparent),
        )
        level, why = _RESENT[job.outcome]
        log.log(level, "job %s sent again (%s)", job.job_id, why)
