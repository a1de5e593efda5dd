"""Fair dispatch across tenants: a queue per tenant in each lane, and the order workers read
them in (kombu's Redis transport asks a "queue cycle" for its BRPOP keys before each read).

Lanes first (every `interactive` queue before any `batch` one), then tenants round-robin
within a lane, a tenant staying first for its weight in messages; a tenant at its running
cap is left out of the read while it is. The cap itself is the claim's to enforce
(chatq/jobs/claim.lua); this order only keeps workers from taking what the claim would park.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from chatq import keys, runtime
from chatq.config import LANES as LANES
from chatq.config import Settings

log = logging.getLogger(__name__)

# How long a worker trusts its copy of the tenants' running counts.
RUNNING_REFRESH_S = 0.1

# How soon a job parked over its tenant's cap (chatq/jobs/claim.lua) is sent again on Redis.
# There each read leaves tenants at their cap out, so only the few messages taken on a count
# a moment old are parked: sending them again every second costs little, where waiting a
# lease (10 s) held them back long after their tenant had room. On RabbitMQ, which delivers
# every message of a capped tenant and parks those over the cap, they wait a lease.
PARKED_RETRY_S = 1.0


def queue_name(lane: str, tenant: str) -> str:
    """The queue of `tenant`'s jobs in `lane`: `interactive.alpha`."""
    return f"{lane}.{tenant}"


@dataclass(frozen=True)
class Plan:
    """The tenants, their weights and running caps; no tenants: one queue per lane (FIFO)."""

    tenants: tuple[str, ...] = ()
    weights: tuple[tuple[str, int], ...] = ()
    max_running: int = 0
    max_running_overrides: tuple[tuple[str, int], ...] = ()

    def lane_queues(self, lane: str) -> list[str]:
        """Every queue of `lane`: one per tenant, then the lane's own (owners not configured,
        and messages sent before fair dispatch was on)."""
        return [queue_name(lane, t) for t in self.tenants] + [lane]

    def queue_for(self, lane: str, owner: str) -> str:
        """Where a job of `owner` in `lane` waits."""
        return queue_name(lane, owner) if owner in self.tenants else lane

    def weight(self, tenant: str) -> int:
        """Messages a tenant takes in a row while first in its lane's turn."""
        return dict(self.weights).get(tenant, 1)

    def cap(self, tenant: str) -> int:
        """The most jobs `tenant` may have running at once (0: no cap)."""
        return dict(self.max_running_overrides).get(tenant, self.max_running)

    @property
    def capped(self) -> bool:
        """Whether any tenant has a running cap."""
        return bool(self.max_running or any(n for _, n in self.max_running_overrides))


def park_s(settings: Settings, amqp: bool) -> float:
    """How long a job parked over its tenant's cap waits before it is sent again."""
    return settings.lease_s if amqp else min(settings.lease_s, PARKED_RETRY_S)


def plan(settings: Settings) -> Plan:
    """The Plan of `settings` (tenants only with CHATQ_FAIR_DISPATCH on)."""
    tenants = tuple(dict.fromkeys(name for name, _ in settings.api_keys))
    return Plan(
        tenants if settings.fair_dispatch else (),
        settings.tenant_weights,
        settings.tenant_max_running,
        settings.tenant_max_running_overrides,
    )


class RunningCounts:
    """The tenants at their running cap, as the store counts them, re-read at most every
    RUNNING_REFRESH_S (one pipelined round trip) and only when a cap is set.

    A read gives each capped tenant's room (its cap less its running jobs) to the live
    workers in equal shares, rounded up; each message this process takes uses one of its
    share until the next read. Workers that each took the whole room from the same read
    parked all but one worker's worth of it (about 3 in 10 jobs of the bench's capped flood on
    two workers; README, "Fair dispatch"): shares leave about one job per other worker.
    """

    def __init__(self, plan: Plan, connect: Callable[[], Any]) -> None:
        self.plan = plan
        self.connect = connect
        self._client: Any = None
        self._lock = threading.Lock()
        self._read_at = -RUNNING_REFRESH_S
        self._share: dict[str, int] = {}

    def capped(self) -> frozenset[str]:
        """The tenants with no share left to this process (none if the store cannot say)."""
        if not self.plan.capped:
            return frozenset()
        with self._lock:
            if time.monotonic() - self._read_at >= RUNNING_REFRESH_S:
                self._read_at = time.monotonic()
                self._share = self._read()
            return frozenset(t for t, n in self._share.items() if n <= 0)

    def taken(self, tenant: str) -> None:
        """This process took a message of `tenant`'s: one less in its share."""
        with self._lock:
            if tenant in self._share:
                self._share[tenant] -= 1

    def _read(self) -> dict[str, int]:
        limited = [t for t in self.plan.tenants if self.plan.cap(t)]
        try:
            if self._client is None:
                self._client = self.connect()
            pipe = self._client.pipeline(transaction=False)
            for tenant in limited:
                pipe.scard(keys.tenant_running(tenant))
            pipe.hvals(keys.workers())
            pipe.time()
            *counts, beats, (seconds, micros) = pipe.execute()
        except Exception as exc:  # the claim still enforces the cap: read all queues meanwhile
            log.warning("cannot read the tenants' running counts: %s", type(exc).__name__)
            return {}
        workers = max(1, runtime.live_count(beats, seconds + micros / 1e6))
        return {
            t: -(-(self.plan.cap(t) - int(n)) // workers)  # rounded up
            for t, n in zip(limited, counts, strict=True)
        }


class TenantCycle:
    """kombu's queue cycle (`queue_order_strategy`) for the Redis transport: see the module
    docstring. kombu calls `update` with the queues consumed, `consume` for the BRPOP order
    before each read, and `rotate` with the queue each message came from."""

    def __init__(self, plan: Plan, running: RunningCounts | None = None) -> None:
        self.plan = plan
        self.running = running
        self.items: list[str] = []
        # Each lane's tenants in their turn order (the lane's own queue is read after them).
        self.turns = {lane: list(plan.tenants) for lane in LANES}
        self.served = dict.fromkeys(((lane, t) for lane in LANES for t in plan.tenants), 0)

    def update(self, it: Iterable[str]) -> None:
        """The queues this channel consumes."""
        self.items[:] = it

    def consume(self, n: int) -> list[str]:
        """The queues to read, in order, leaving out tenants at their cap."""
        capped = self.running.capped() if self.running else frozenset()
        consumed = set(self.items)
        ordered = [
            q
            for lane in LANES
            for q in [queue_name(lane, t) for t in self.turns[lane] if t not in capped] + [lane]
        ]
        lanes = [q for q in ordered if q in consumed]
        known = {q for lane in LANES for q in self.plan.lane_queues(lane)}
        return (lanes + [q for q in self.items if q not in known])[:n]

    def rotate(self, last_used: str) -> None:
        """A message came from `last_used`: its tenant moves to the end of its lane's turn
        once it has had its weight in a row."""
        lane, _, tenant = last_used.partition(".")
        if (lane, tenant) not in self.served:
            return
        if self.running:
            self.running.taken(tenant)
        self.served[lane, tenant] += 1
        if self.served[lane, tenant] >= self.plan.weight(tenant):
            self.served[lane, tenant] = 0
            turn = self.turns[lane]
            turn.append(turn.pop(turn.index(tenant)))
