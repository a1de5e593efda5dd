"""Each worker process's webhook delivery pool: up to CHATQ_WEBHOOK_CONCURRENCY attempts at
once, each in a thread of its own (a greenlet under gevent), never in a job's slot.

A supervisor thread takes due deliveries from Redis for the free slots (at most
CHATQ_WEBHOOK_ENDPOINT_CONCURRENCY running per endpoint and CHATQ_WEBHOOK_KEY_CONCURRENCY per
key across all workers: the take is one Lua step), shuts each attempt's connection when its
deadline passes, and renews the holds of the attempts still running, so that no other worker
takes a delivery while its attempt can still run; an attempt whose delivery it no longer holds
(deleted with its endpoint, or taken over) is cut at once. A worker that dies leaves its
deliveries to be taken again once their holds end.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from chatq.topology import is_backend_error
from worker.context import WorkerContext
from worker.metrics import WEBHOOK_SLOTS, WEBHOOK_SLOTS_BUSY
from worker.webhooks.deliver import deliver, hooks
from worker.webhooks.send import Deadline

log = logging.getLogger(__name__)
# How often the supervisor looks for due deliveries (it is woken at once for those this
# process makes, and when a slot frees up), and renews the holds of running attempts.
TICK_S = 1.0
RENEW_EVERY_S = 1.0
MIN_WAIT_S = 0.01


@dataclass(frozen=True)
class Running:
    """One attempt running in this process: the token that holds its delivery, its end."""

    token: str
    deadline: Deadline


class DeliveryPool:
    """See the module docstring."""

    def __init__(self, ctx: WorkerContext) -> None:
        s = ctx.settings
        self.ctx = ctx
        self.slots = s.webhook_concurrency
        self.endpoint_cap = s.webhook_endpoint_concurrency
        self.key_cap = s.webhook_key_concurrency
        self.timeout_s = s.webhook_timeout_s
        self.running: dict[str, Running] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._renewed_at = 0.0

    def start(self) -> None:
        """Start taking deliveries (none with no slots)."""
        WEBHOOK_SLOTS.set(self.slots)
        if self.slots:
            self._thread = threading.Thread(target=self._run, name="chatq-webhooks", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Take no more; wait up to `timeout_s` for the attempts running (each ends by its
        deadline)."""
        self._stopping.set()
        hooks(self.ctx).due.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def busy(self) -> int:
        """Attempts running in this process."""
        with self._lock:
            return len(self.running)

    def _run(self) -> None:
        due = hooks(self.ctx).due
        while not (self._stopping.is_set() and not self.busy()):
            due.clear()
            try:
                self._tick(take=not self._stopping.is_set())
            except Exception as exc:
                if not is_backend_error(exc):
                    log.exception("webhook delivery pool tick failed")
            due.wait(self._wait_s())

    def _tick(self, take: bool) -> None:
        with self._lock:
            running = list(self.running.items())
        now_s = time.monotonic()
        for _, attempt in running:
            if attempt.deadline.at_s <= now_s:
                attempt.deadline.expire()
        if running and now_s - self._renewed_at >= RENEW_EVERY_S:
            held = hooks(self.ctx).deliveries.renew([(dlv, a.token) for dlv, a in running])
            for dlv, attempt in running:
                if dlv not in held:  # its record says another attempt, or none, runs now
                    attempt.deadline.expire()
            self._renewed_at = now_s
        free = self.slots - len(running)
        if take and free > 0:
            taken = hooks(self.ctx).deliveries.take(free, self.endpoint_cap, self.key_cap)
            for dlv, token in taken:
                self._start(dlv, token)

    def _wait_s(self) -> float:
        """Until the next tick, or the next deadline if sooner."""
        with self._lock:
            ends = [a.deadline.at_s for a in self.running.values() if not a.deadline.expired]
        soonest_s = min(ends, default=time.monotonic() + TICK_S) - time.monotonic()
        return max(MIN_WAIT_S, min(TICK_S, soonest_s))

    def _start(self, dlv: str, token: str) -> None:
        deadline = Deadline(self.timeout_s)
        with self._lock:
            self.running[dlv] = Running(token, deadline)
            WEBHOOK_SLOTS_BUSY.set(len(self.running))
        threading.Thread(
            target=self._attempt, args=(dlv, token, deadline), name="chatq-webhook", daemon=True
        ).start()

    def _attempt(self, dlv: str, token: str, deadline: Deadline) -> None:
        try:
            deliver(self.ctx, dlv, token, deadline)
        except Exception as exc:  # Redis away: the hold runs out, and the attempt is lost
            log.warning("webhook delivery %s not recorded: %s", dlv, type(exc).__name__)
        finally:
            with self._lock:
                self.running.pop(dlv, None)
                WEBHOOK_SLOTS_BUSY.set(len(self.running))
            hooks(self.ctx).due.set()
