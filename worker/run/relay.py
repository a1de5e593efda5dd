"""The relay: each worker process reads the outbox of the lanes it runs and hands every ended
job to the handlers that care (webhooks, batches, token limits). An entry is acknowledged
once every handler took it; one that raised is read again later, so handlers must be
idempotent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from chatq.jobs import Ended, Outbox
from chatq.topology import is_backend_error
from worker.context import WorkerContext

log = logging.getLogger(__name__)
Handler = Callable[[WorkerContext, Ended], None]
HANDLERS: list[Handler] = []
RETRY_DELAY_S = 1.0


def handler(fn: Handler) -> Handler:
    """Register `fn` to be called with every ended job the outbox announces."""
    HANDLERS.append(fn)
    return fn


class Relay:
    """One thread per worker process (a greenlet under gevent)."""

    def __init__(self, ctx: WorkerContext, name: str, claim_idle_s: float = 30.0) -> None:
        self.ctx = ctx
        self.outbox = Outbox(ctx.store.redis, name, claim_idle_s, ctx.settings.worker_lanes)
        self._stop = threading.Event()

    def start(self) -> None:
        """Start relaying."""
        threading.Thread(target=self._run, name="chatq-relay", daemon=True).start()

    def stop(self) -> None:
        """Stop after the current read."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                entries = self.outbox.read()
                self.outbox.ack([entry for entry in entries if self._handle(entry)])
            except Exception as exc:
                if not is_backend_error(exc):
                    log.exception("relay failed")
                self._stop.wait(RETRY_DELAY_S)

    def _handle(self, entry: Ended) -> bool:
        try:
            for handle in HANDLERS:
                handle(self.ctx, entry)
        except Exception:
            log.exception(
                "relay: job %s (%s) not handled; it will be again", entry.job_id, entry.status
            )
            return False
        return True
