"""Webhook endpoints: those of CHATQ_WEBHOOKS (from the settings) and those made through the
API (in Redis), with their signing secrets and whether they are disabled."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

import redis
from msgspec import structs

from chatq import keys
from chatq.config import WebhookConfig
from chatq.webhooks import scripts
from chatq.webhooks.events import EVENT_TYPES, new_secret, secret_hint
from chatq.webhooks.objects import WebhookEndpoint, WebhookEndpointWithSecret
from chatq.webhooks.owners import KnownOwners, announce_change

MAX_ENDPOINTS_PER_KEY = 20
ROTATION_OVERLAP_S = 86400
API = "api"
CONFIG = "config"


@dataclass(frozen=True)
class Endpoint:
    """One endpoint. `secrets` pairs each signing secret with when it stops signing (0:
    never); the first is the newest."""

    id: str
    owner: str
    url: str
    source: str
    name: str = ""
    event_types: tuple[str, ...] = EVENT_TYPES
    secrets: tuple[tuple[str, float], ...] = ()
    created_at: int = 0
    updated_at: int = 0
    disabled: dict[str, Any] | None = field(default=None, compare=False)

    def signing_secrets(self, now_s: float) -> list[str]:
        """The secrets that sign a delivery made at `now_s`."""
        return [s for s, until in self.secrets if not until or until > now_s]

    def public(self, with_secret: bool = False) -> dict[str, Any]:
        """The endpoint as the API shows it; its secret only when `with_secret`."""
        view: dict[str, Any] = {
            "id": self.id,
            "object": "webhook_endpoint",
            "url": self.url,
            "name": self.name,
            "event_types": list(self.event_types),
            "source": self.source,
            "status": "disabled" if self.disabled else "enabled",
            "disabled_reason": (self.disabled or {}).get("reason"),
            "signing_secret_hint": secret_hint(self.secrets[0][0]) if self.secrets else None,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if with_secret:
            secret = self.secrets[0][0]
            return structs.asdict(WebhookEndpointWithSecret(**view, signing_secret=secret))
        return structs.asdict(WebhookEndpoint(**view))


def _from_config(config: WebhookConfig) -> Endpoint:
    return Endpoint(
        config.endpoint_id,
        config.owner,
        config.url,
        CONFIG,
        secrets=tuple((s, 0.0) for s in config.secrets),
    )


def _from_hash(raw: dict[str, str]) -> Endpoint:
    return Endpoint(
        raw["id"],
        raw["owner"],
        raw["url"],
        API,
        raw.get("name", ""),
        tuple(json.loads(raw.get("event_types") or "[]")),
        tuple((s, float(until)) for s, until in json.loads(raw.get("secrets") or "[]")),
        int(raw.get("created_at") or 0),
        int(raw.get("updated_at") or 0),
    )


def _fields(e: Endpoint) -> dict[str, str]:
    return {
        "id": e.id,
        "owner": e.owner,
        "url": e.url,
        "name": e.name,
        "event_types": json.dumps(list(e.event_types)),
        "secrets": json.dumps(e.secrets),
        "created_at": str(e.created_at),
        "updated_at": str(e.updated_at),
    }


def _flat(e: Endpoint) -> list[str]:
    return [item for pair in _fields(e).items() for item in pair]


def new_endpoint_id() -> str:
    """A fresh id for an endpoint made through the API."""
    return "wh_" + secrets.token_urlsafe(18)


class Endpoints:
    """Every endpoint: the configured ones and those in Redis."""

    def __init__(
        self,
        client: redis.Redis,
        configured: tuple[WebhookConfig, ...],
        owners: KnownOwners | None = None,
    ) -> None:
        self.redis = client
        self.configured = {c.endpoint_id: _from_config(c) for c in configured}
        # A web's answers of has_any, kept right by its notification listener.
        self.owners = owners
        self._create = scripts.CREATE.on(client)

    def _disabled(self, endpoint: Endpoint, reasons: dict[str, str]) -> Endpoint:
        raw = reasons.get(endpoint.id)
        if raw is None:
            return endpoint
        return replace(endpoint, disabled=json.loads(raw))

    def get(self, endpoint_id: str) -> Endpoint | None:
        """The endpoint `endpoint_id`, or None."""
        endpoint = self.configured.get(endpoint_id)
        if endpoint is None:
            raw: dict[str, str] = self.redis.hgetall(keys.webhook(endpoint_id))  # type: ignore[assignment]
            endpoint = _from_hash(raw) if raw else None
        if endpoint is None:
            return None
        reason: str | None = self.redis.hget(  # type: ignore[assignment]
            keys.webhooks_disabled(), endpoint_id
        )
        return self._disabled(endpoint, {endpoint_id: reason} if reason else {})

    def owned(self, owner: str, endpoint_id: str) -> Endpoint | None:
        """The endpoint if it is `owner`'s; another key's looks like none."""
        endpoint = self.get(endpoint_id) if endpoint_id.startswith("wh_") else None
        return endpoint if endpoint is not None and endpoint.owner == owner else None

    def of_owner(self, owner: str) -> list[Endpoint]:
        """The key name's endpoints, configured ones first, then by creation."""
        ids: list[str] = sorted(self.redis.smembers(keys.webhooks_of(owner)))  # type: ignore[arg-type]
        pipe = self.redis.pipeline(transaction=False)
        for endpoint_id in ids:
            pipe.hgetall(keys.webhook(endpoint_id))
        pipe.hgetall(keys.webhooks_disabled())
        *raws, reasons = pipe.execute()
        made = sorted((_from_hash(r) for r in raws if r), key=lambda e: (e.created_at, e.id))
        mine = [e for e in self.configured.values() if e.owner == owner] + made
        return [self._disabled(e, reasons) for e in mine]

    def has_any(self, owner: str) -> bool:
        """Whether the key name has an endpoint at all (one Redis call at most, none when
        this process knows the answer)."""
        if any(e.owner == owner for e in self.configured.values()):
            return True
        if self.owners is None:
            return bool(self.redis.scard(keys.webhooks_of(owner)))
        known, generation = self.owners.get(owner)
        if known is None:
            known = bool(self.redis.scard(keys.webhooks_of(owner)))
            self.owners.put(owner, known, generation)
        return known

    def create(
        self, owner: str, url: str, name: str, event_types: tuple[str, ...]
    ) -> Endpoint | None:
        """A new endpoint of `owner` with a fresh secret; None when the key has
        MAX_ENDPOINTS_PER_KEY already (configured ones count), checked and made in one step."""
        now = int(time.time())
        endpoint = Endpoint(
            new_endpoint_id(), owner, url, API, name, event_types, ((new_secret(), 0.0),), now, now
        )
        configured = sum(e.owner == owner for e in self.configured.values())
        made = self._create(
            owned=keys.webhooks_of(owner),
            endpoint=keys.webhook(endpoint.id),
            id=endpoint.id,
            most=MAX_ENDPOINTS_PER_KEY - configured,
            fields=tuple(_flat(endpoint)),
        )
        if not made:
            return None
        announce_change(self.redis, owner)
        return endpoint

    def _write(self, e: Endpoint) -> None:
        self.redis.hset(keys.webhook(e.id), items=_flat(e))

    def rotate(self, endpoint: Endpoint, keep_old: bool) -> Endpoint:
        """A new secret; the old ones keep signing for a day when `keep_old`."""
        now = time.time()
        kept = tuple(
            (s, min(until or now + ROTATION_OVERLAP_S, now + ROTATION_OVERLAP_S))
            for s, until in endpoint.secrets
            if keep_old and (not until or until > now)
        )
        rotated = replace(endpoint, secrets=((new_secret(), 0.0), *kept), updated_at=int(now))
        self._write(rotated)
        return rotated

    def delete(self, endpoint: Endpoint) -> None:
        """Remove an endpoint made through the API, with its disabled state."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(keys.webhook(endpoint.id))
        pipe.srem(keys.webhooks_of(endpoint.owner), endpoint.id)
        pipe.hdel(keys.webhooks_disabled(), endpoint.id)
        pipe.execute()
        announce_change(self.redis, endpoint.owner)

    def enable(self, endpoint: Endpoint) -> None:
        """Deliver to a disabled endpoint again."""
        self.redis.hdel(keys.webhooks_disabled(), endpoint.id)
