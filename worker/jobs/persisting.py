"""Store steps that outlast a Redis outage: retried until they go through or time runs out.

The store's worker steps may be repeated after a lost answer without doing anything twice,
so a step whose answer was lost with the connection is simply sent again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from chatq.topology import is_backend_error

log = logging.getLogger(__name__)
T = TypeVar("T")
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 1.0


def persist(step: Callable[[], T], *, until: float, what: str) -> T:
    """`step()`, retried through Redis errors until it succeeds or monotonic time `until`."""
    delay_s = FIRST_DELAY_S
    failing_since = 0.0
    while True:
        try:
            answer = step()
        except Exception as exc:
            if not is_backend_error(exc) or time.monotonic() + delay_s >= until:
                raise
            if not failing_since:
                failing_since = time.monotonic()
                log.warning("%s: Redis unavailable (%s); retrying", what, type(exc).__name__)
            time.sleep(delay_s)
            delay_s = min(MAX_DELAY_S, delay_s * 2)
            continue
        if failing_since:
            log.info("%s went through after %.1f s", what, time.monotonic() - failing_since)
        return answer
