"""This process's side of pacing (chatq/admission/pacing.py): which endpoints have known limits,
what their last answer said, and each call's wait for its turn.

An endpoint whose limits are neither configured nor yet seen in an answer costs no Redis
call at all. Once they are known, a call makes one: it hands over what this process's last
answer from the endpoint said and takes its own share. A 429 is told to every worker at once.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from chatq.admission import Pacing, Seen
from chatq.chat import charged_tokens, count_prompt_tokens
from chatq.config import Settings
from chatq.topology import BACKEND_ERRORS
from worker import metrics
from worker.jobs import Handle
from worker.upstream.attempts import Attempt
from worker.upstream.endpoints import endpoint_id, endpoint_label

log = logging.getLogger(__name__)
STATE_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, *BACKEND_ERRORS)


class Pacer:
    """Waits, before each upstream call, for its share of the endpoint's limits."""

    def __init__(self, settings: Settings, client: Any) -> None:
        on = settings.upstream_pacing
        self.pacing = Pacing(client, settings.upstream_rpm, settings.upstream_tpm) if on else None
        self.configured = on and (settings.upstream_rpm > 0 or settings.upstream_tpm > 0)
        self.output_budget = settings.default_output_budget
        self._known: set[str] = set()
        self._seen: dict[str, tuple[Seen, float]] = {}
        self._lock = threading.Lock()

    def active(self, url: str) -> bool:
        """Whether calls to `url` are paced (its limits are configured or were seen)."""
        return self.pacing is not None and (self.configured or url in self._known)

    def before(
        self,
        url: str,
        request: dict[str, Any],
        handle: Handle,
        prompt_tokens: Callable[[], int] | None = None,
    ) -> bool:
        """Wait for the call's turn; False when no turn comes before the job's deadline (or
        the job was aborted while waiting). `prompt_tokens` gives the request's count (kept
        by the job: a retry does not count again), else it is counted here."""
        if self.pacing is None or not self.active(url):
            return True
        prompt = prompt_tokens() if prompt_tokens else count_prompt_tokens(request)
        tokens = charged_tokens(request, prompt, self.output_budget)
        try:
            turn = self.pacing.take(endpoint_id(url), tokens, handle.remaining_s, self._last(url))
        except STATE_ERRORS:
            return True  # pacing is advice: without Redis, the upstream's 429s still tell
        if not turn.known:
            self._known.discard(url)
            return True
        if not turn.taken:
            return False
        metrics.PACING_WAIT.labels(endpoint_label(url)).observe(turn.wait_s)
        return turn.wait_s <= 0 or handle.sleep(turn.wait_s)

    def after(self, url: str, result: Attempt) -> None:
        """Learn from an answer's headers: kept for this process's next call, or (a 429)
        written for every worker at once."""
        if self.pacing is None:
            return
        rate_limited = result.status == 429
        seen = Seen.of(result.rate_headers, rate_limited, result.retry_after_s)
        if seen is None:
            return
        self._known.add(url)
        if not rate_limited:
            with self._lock:
                self._seen[url] = (seen, result.sent_at)
            return
        aged = dataclasses.replace(seen, age_s=time.monotonic() - result.sent_at)
        try:
            self.pacing.learn(endpoint_id(url), aged)
        except STATE_ERRORS:
            log.warning("could not share a 429 of %s: Redis is unreachable", endpoint_label(url))

    def _last(self, url: str) -> Seen | None:
        # Sent with every call, not once: concurrent calls reach Redis in any order, and the
        # one that carries it may come after one that finds no limits known yet. Sent again,
        # it changes nothing (the levels only go down to what the answer allows).
        with self._lock:
            found = self._seen.get(url)
        if found is None:
            return None
        seen, sent_at = found
        return dataclasses.replace(seen, age_s=time.monotonic() - sent_at)
