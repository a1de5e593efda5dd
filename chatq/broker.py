"""What chatq reads of the Celery broker's own keys (kombu's Redis transport)."""

from __future__ import annotations

import redis

from chatq.celery_app import QUEUES
from chatq.store import lua_source

# kombu's Redis transport keeps a queue's messages of priority p in `name\x06\x16p`, and the
# messages workers have reserved but not acknowledged in the hash `unacked`.
PRIORITY_SEP = "\x06\x16"
PRIORITY_STEPS = (0, 3, 6, 9)
UNACKED = "unacked"


def queue_keys(queue: str, prefix: str = "") -> list[str]:
    """Every Redis list that holds messages of `queue`, priority sub-lists included."""
    names = [queue] + [f"{queue}{PRIORITY_SEP}{p}" for p in PRIORITY_STEPS if p]
    return [prefix + name for name in names]


class Broker:
    """Looks for jobs' messages in the broker."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._missing = client.register_script(lua_source("missing"))

    def missing(self, job_ids: list[str]) -> list[str]:
        """The ids among `job_ids` whose message is neither queued nor reserved by a worker."""
        if not job_ids:
            return []
        lists = [key for queue in QUEUES for key in queue_keys(queue)]
        return [str(i) for i in self._missing(keys=[*lists, UNACKED], args=job_ids)]
