"""Webhook deliveries in Redis: each a hash with its attempts, a log per endpoint, and one
sorted set of when each is due. The schedule lives here, not in Celery's ETAs, so that a
delivery survives restarts; each worker's delivery pool takes the due ones, each attempt runs
once at a time, and at most a cap of them at once per endpoint and per key, across workers
(chatq/webhooks/webhook_*.lua)."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import msgspec
import redis

from chatq import keys
from chatq.scripting import flat_pairs
from chatq.webhooks import scripts
from chatq.webhooks.events import MAX_ATTEMPTS, Event
from chatq.webhooks.objects import WebhookDelivery
from chatq.webhooks.store import API, Endpoint

PENDING = "pending"
DELIVERED = "delivered"
FAILED = "failed"
IN_PROGRESS = "in_progress"
MAX_LOG_PAGE = 100
# Deleting an endpoint deletes this many of its deliveries per Lua step (Redis serves nothing
# else meanwhile), until none is left.
FORGET_PAGE = 1000
# A delivery taken by a worker is held this much longer than its attempt's deadline: its
# worker renews the hold while the attempt runs, and a lost worker's delivery is taken again
# once the hold runs out.
HOLD_MARGIN_S = 5.0


def delivery_hold_s(timeout_s: float) -> float:
    """How long a delivery taken by a worker is held: the attempt's deadline and a margin."""
    return timeout_s + HOLD_MARGIN_S


def new_delivery_id() -> str:
    """A fresh delivery id (a replay's)."""
    return "dlv_" + secrets.token_urlsafe(18)


@dataclass(frozen=True)
class Attempt:
    """What one attempt came to, and why when it failed; `status` is what the delivery is
    after it."""

    status: str
    outcome: str
    status_code: int | None
    attempted_at: float
    duration_s: float
    delay_s: float = 0.0
    reason: str | None = None

    def as_json(self) -> str:
        """The attempt as the log keeps it."""
        return json.dumps(
            {
                "attempted_at": round(self.attempted_at, 3),
                "outcome": self.outcome,
                "status_code": self.status_code,
                "duration_s": round(self.duration_s, 3),
                "reason": self.reason,
            }
        )


@dataclass(frozen=True)
class Started:
    """A delivery a worker may attempt now: its record, and Redis's time at the start."""

    record: dict[str, str]
    now_s: float


def _time(raw: str | None) -> float | None:
    return round(float(raw), 3) if raw else None


def public_view(record: dict[str, str]) -> dict[str, Any]:
    """A delivery as the API shows it."""
    delivery = WebhookDelivery(
        id=record["id"],
        object="webhook.delivery",
        endpoint_id=record.get("endpoint", ""),
        event=json.loads(record.get("body") or "{}"),
        status=record.get("status", PENDING),  # type: ignore[arg-type]
        attempts=[{"reason": None, **a} for a in json.loads(record.get("attempts") or "[]")],  # type: ignore[misc]
        next_attempt_at=_time(record.get("next_at")) if record.get("status") == PENDING else None,
        created_at=_time(record.get("created_at")),  # type: ignore[arg-type]
        replay_of=record.get("replay_of") or None,
    )
    return msgspec.to_builtins(delivery)  # type: ignore[no-any-return]


class Deliveries:
    """The deliveries of every endpoint, in one Redis; `hold_s` is how long a taken delivery
    is held (see `delivery_hold_s`), for the workers that take them."""

    def __init__(self, client: redis.Redis, log_ttl_s: int, hold_s: float = 0.0) -> None:
        self.redis = client
        self.log_ttl_s = log_ttl_s
        self.hold_s = hold_s
        self._add = scripts.ADD.on(client)
        self._take = scripts.TAKE.on(client)
        self._begin = scripts.BEGIN.on(client)
        self._renew = scripts.RENEW.on(client)
        self._finish = scripts.FINISH.on(client)
        self._forget = scripts.FORGET.on(client)

    def add(self, delivery_id: str, endpoint: Endpoint, event: Event, replay_of: str = "") -> bool:
        """Record a delivery due now, of the endpoint's key; False if it existed already, or
        the endpoint (made through the API) is deleted."""
        fields = {
            "event": event.id,
            "type": event.type,
            "body": event.body(),
            "replay_of": replay_of,
        }
        return self._add(
            id=delivery_id,
            endpoint=endpoint.id,
            owner=endpoint.owner,
            made_here=endpoint.source == API,
            ttl_s=self.log_ttl_s,
            fields=flat_pairs(fields.items()),
        )

    def take(self, limit: int, endpoint_cap: int, key_cap: int) -> list[tuple[str, str]]:
        """(delivery id, token) of up to `limit` deliveries due now, each held for the caller;
        none of an endpoint that has `endpoint_cap` attempts running, nor of a key that has
        `key_cap` (in any worker)."""
        if limit <= 0:
            return []
        scan = max(50, 5 * limit)
        return self._take(
            hold_s=self.hold_s, limit=limit, endpoint_cap=endpoint_cap, key_cap=key_cap, scan=scan
        )

    def begin(self, delivery_id: str, token: str) -> Started | None:
        """The delivery, its attempt logged as begun, if `token` still holds it."""
        begun = self._begin(
            id=delivery_id, token=token, hold_s=self.hold_s, max_attempts=MAX_ATTEMPTS
        )
        return Started(begun.record, begun.now_s) if begun else None

    def renew(self, held: list[tuple[str, str]]) -> set[str]:
        """Hold the (delivery id, token) pairs whose attempts still run for `hold_s` more; the
        ids still held (the others were taken over, ended, or deleted)."""
        if not held:
            return set()
        return self._renew(hold_s=self.hold_s, held=flat_pairs(held))

    def finish(
        self, delivery_id: str, token: str, attempt: Attempt, disable: tuple[str, str] = ("", "")
    ) -> bool:
        """Record `attempt`; `disable` is (endpoint id, reason JSON) to disable one."""
        return self._finish(
            id=delivery_id,
            token=token,
            status=attempt.status,
            attempt=attempt.as_json(),
            delay_s=attempt.delay_s,
            ttl_s=self.log_ttl_s,
            disable=disable[0],
            reason=disable[1],
        )

    def get(self, delivery_id: str) -> dict[str, str] | None:
        """The delivery's record, or None."""
        record: dict[str, str] = self.redis.hgetall(  # type: ignore[assignment]
            keys.webhook_delivery(delivery_id)
        )
        return record or None

    def page(
        self, endpoint_id: str, limit: int, after: str | None
    ) -> tuple[list[dict[str, str]], bool]:
        """An endpoint's deliveries, newest first, after the delivery `after`; and whether
        more follow."""
        log = keys.webhook_deliveries(endpoint_id)
        start = 0
        if after:
            rank: Any = self.redis.zrevrank(log, after)
            start = 0 if rank is None else int(rank) + 1
        ids: list[str] = self.redis.zrevrange(log, start, start + limit)  # type: ignore[assignment]
        pipe = self.redis.pipeline(transaction=False)
        for delivery_id in ids[:limit]:
            pipe.hgetall(keys.webhook_delivery(delivery_id))
        records = [r for r in pipe.execute() if r]
        return records, len(ids) > limit

    def forget(self, endpoint_id: str, page: int = FORGET_PAGE) -> None:
        """Delete a deleted endpoint's deliveries and log, `page` per Redis step; an attempt
        still running ends unrecorded."""
        while self._forget(endpoint=endpoint_id, page=page):
            pass
