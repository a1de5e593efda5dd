"""Writes that wait for replicas: a store script followed by `WAIT` on the same connection.

`WAIT n timeout` counts the replicas holding every write this connection made, so it must run
on the connection that ran the script; a pipeline without MULTI sends both on one. WAIT cannot
run inside Lua. A write WAIT does not see acknowledged in time is still on the primary: it is
lost only if the primary is lost before a replica copies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError


@dataclass(frozen=True)
class Replication:
    """How many replicas must acknowledge a job's acceptance or end (0: none, no WAIT), and
    how long to wait for them."""

    replicas: int = 0
    timeout_ms: int = 500


def replication(settings: Any) -> Replication:
    """CHATQ_REDIS_MIN_REPLICAS and CHATQ_REDIS_WAIT_TIMEOUT_MS."""
    return Replication(settings.redis_min_replicas, settings.redis_wait_timeout_ms)


NO_WAIT = Replication()


class ReplicasBehind(redis.RedisError):
    """Fewer replicas than required acknowledged a write within the timeout."""

    def __init__(self, acked: int, wanted: Replication) -> None:
        super().__init__(
            f"{acked} of {wanted.replicas} replicas acknowledged the write "
            f"within {wanted.timeout_ms} ms"
        )
        self.acked = acked


def run_and_wait(
    client: redis.Redis, script: Script, anchor: str, args: list[Any], wanted: Replication
) -> tuple[Any, int]:
    """Run `script` (keys: `anchor`), then WAIT: (its answer, replicas that acknowledged)."""
    for _ in range(2):
        pipe = client.pipeline(transaction=False)
        pipe.evalsha(script.sha, 1, anchor, *args)
        pipe.wait(wanted.replicas, wanted.timeout_ms)
        answer, acked = pipe.execute(raise_on_error=False)
        if not isinstance(answer, NoScriptError):
            break
        # A new primary (after a failover) has not seen the script yet.
        script.sha = client.script_load(script.script)
    for reply in (answer, acked):
        if isinstance(reply, Exception):
            raise reply
    return answer, int(acked)
