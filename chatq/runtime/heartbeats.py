"""The workers' heartbeats (keys.workers(): "slots busy redis_time" per worker process)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# A worker silent this long is gone: it counts no more, and GET /v1/queue forgets it.
WORKER_STALE_S = 10.0


@dataclass(frozen=True)
class Beat:
    """One worker's last heartbeat."""

    slots: int
    busy: int
    seen_s: float  # Redis's clock

    def live(self, now_s: float) -> bool:
        """Whether the worker has beaten within WORKER_STALE_S of `now_s`."""
        return now_s - self.seen_s <= WORKER_STALE_S


def parse(value: str | bytes) -> Beat:
    """A heartbeat as the store writes it (missing parts read as 0)."""
    text = value.decode() if isinstance(value, bytes) else value
    slots, busy, seen_s = [*text.split(), "0", "0", "0"][:3]
    return Beat(int(slots), int(busy), float(seen_s))


def live_count(values: Iterable[str | bytes], now_s: float) -> int:
    """How many of these heartbeats are live at `now_s`."""
    return sum(parse(value).live(now_s) for value in values)
