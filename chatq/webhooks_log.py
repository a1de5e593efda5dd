"""Webhook deliveries in Redis: each a hash with its attempts, a log per endpoint, and one
sorted set of when each is due. The schedule lives here, not in Celery's ETAs, so that a
delivery survives restarts and each attempt runs once (chatq/lua/webhook_*.lua)."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import redis

from chatq import keys
from chatq.lua_scripts import register
from chatq.webhooks import Event

PENDING = "pending"
DELIVERED = "delivered"
FAILED = "failed"
MAX_LOG_PAGE = 100


def new_delivery_id() -> str:
    """A fresh delivery id (a replay's)."""
    return "dlv_" + secrets.token_urlsafe(18)


@dataclass(frozen=True)
class Attempt:
    """What one attempt came to; `status` is what the delivery is after it."""

    status: str
    outcome: str
    status_code: int | None
    attempted_at: float
    duration_s: float
    delay_s: float = 0.0

    def as_json(self) -> str:
        """The attempt as the log keeps it."""
        return json.dumps(
            {
                "attempted_at": round(self.attempted_at, 3),
                "outcome": self.outcome,
                "status_code": self.status_code,
                "duration_s": round(self.duration_s, 3),
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
    return {
        "id": record["id"],
        "object": "webhook.delivery",
        "endpoint_id": record.get("endpoint", ""),
        "event": json.loads(record.get("body") or "{}"),
        "status": record.get("status", PENDING),
        "attempts": json.loads(record.get("attempts") or "[]"),
        "next_attempt_at": _time(record.get("next_at"))
        if record.get("status") == PENDING
        else None,
        "created_at": _time(record.get("created_at")),
        "replay_of": record.get("replay_of") or None,
    }


class Deliveries:
    """The deliveries of every endpoint, in one Redis."""

    def __init__(self, client: redis.Redis, log_ttl_s: int, hold_s: float) -> None:
        self.redis = client
        self.log_ttl_s = log_ttl_s
        self.hold_s = hold_s
        self._scripts = {
            name: register(client, name)
            for name in ("webhook_add", "webhook_take", "webhook_begin", "webhook_finish")
        }

    def _run(self, name: str, *args: str | int | float) -> Any:
        # Every key of the webhooks is in the `{g}` slot: any of them routes the call there.
        return self._scripts[name](keys=[keys.webhooks_due()], args=list(args))

    def add(self, delivery_id: str, endpoint_id: str, event: Event, replay_of: str = "") -> str:
        """Record a delivery due now; its dispatch token, or '' if it existed already."""
        fields = {
            "event": event.id,
            "type": event.type,
            "body": event.body(),
            "replay_of": replay_of,
        }
        flat = [item for pair in fields.items() for item in pair]
        token = secrets.token_hex(8)
        return str(
            self._run(
                "webhook_add", delivery_id, endpoint_id, self.log_ttl_s, token, self.hold_s, *flat
            )
        )

    def take(self, limit: int = 100) -> list[tuple[str, str]]:
        """(delivery id, token) of the deliveries due now, each held for a worker."""
        flat = self._run("webhook_take", self.hold_s, limit)
        return list(zip(flat[::2], flat[1::2], strict=True))

    def begin(self, delivery_id: str, token: str) -> Started | None:
        """The delivery, if the message carrying `token` is still the one in charge."""
        answer = self._run("webhook_begin", delivery_id, token, self.hold_s)
        if not answer:
            return None
        now_s, *flat = answer
        return Started(dict(zip(flat[::2], flat[1::2], strict=True)), float(now_s))

    def finish(
        self, delivery_id: str, token: str, attempt: Attempt, disable: tuple[str, str] = ("", "")
    ) -> bool:
        """Record `attempt`; `disable` is (endpoint id, reason JSON) to disable one."""
        return bool(
            self._run(
                "webhook_finish",
                delivery_id,
                token,
                attempt.status,
                attempt.as_json(),
                attempt.delay_s,
                self.log_ttl_s,
                *disable,
            )
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

    def forget(self, endpoint_id: str) -> None:
        """Drop an endpoint's log (its deliveries expire on their own)."""
        self.redis.delete(keys.webhook_deliveries(endpoint_id))
