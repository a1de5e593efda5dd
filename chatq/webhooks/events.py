"""Webhook events as the Standard Webhooks spec signs them: types, thin payloads, signatures,
secrets and the retry schedule."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import secrets
from dataclasses import dataclass
from typing import Any

import msgspec

from chatq import words
from chatq.config import SECRET_PREFIX
from chatq.webhooks.objects import JOB_EVENTS as JOB_EVENTS
from chatq.webhooks.objects import RESPONSE_EVENTS as RESPONSE_EVENTS
from chatq.webhooks.objects import EventData, WebhookEvent

EVENT_TYPES = JOB_EVENTS + RESPONSE_EVENTS
SECRET_BYTES = 32
# The spec's schedule: the delay before each attempt after the first (10 in all).
RETRY_DELAYS_S = (5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
MAX_ATTEMPTS = len(RETRY_DELAYS_S) + 1
JITTER = 0.1
# A receiver's Retry-After is honoured up to the schedule's longest gap.
MAX_RETRY_AFTER_S = 86400.0
MAX_BODY_BYTES = 20_000


@dataclass(frozen=True)
class Event:
    """One event about an ended job: its id (the `webhook-id`), type, time and subject."""

    id: str
    type: str
    created_at: int
    subject_id: str

    def body(self) -> str:
        """The thin payload, exactly the bytes that are signed and sent."""
        kind: Any = self.type  # one of EVENT_TYPES, as every Event is made
        payload = WebhookEvent(self.id, "event", kind, self.created_at, EventData(self.subject_id))
        return msgspec.json.encode(payload).decode()

    @classmethod
    def parse(cls, body: str) -> Event:
        """The event whose payload is `body`."""
        payload = json.loads(body)
        return cls(
            payload["id"], payload["type"], int(payload["created_at"]), payload["data"]["id"]
        )


def event_type(record: dict[str, str], status: str) -> str:
    """The event an ended job makes: a response's (`api` = responses) or a plain job's."""
    if record.get("api") != "responses":
        return f"job.{status}"
    if status == words.COMPLETED and record.get("finish_reason") == "length":
        return "response.incomplete"
    return f"response.{status}"


def subject_id(record: dict[str, str]) -> str:
    """What the event is about: `resp_<token>` for a response, else the job id."""
    job_id = record["id"]
    if record.get("api") == "responses":
        return "resp_" + job_id.removeprefix("job_")
    return job_id


def event_for(record: dict[str, str], status: str) -> Event:
    """The event of this ended job; the same whenever it is made (the relay may repeat)."""
    digest = hashlib.sha256(f"event\0{record['id']}".encode()).hexdigest()[:32]
    ended_at = float(record.get("completed_at") or record.get("created_at") or 0)
    return Event("evt_" + digest, event_type(record, status), int(ended_at), subject_id(record))


def new_secret() -> str:
    """A fresh signing secret: `whsec_` and base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_hint(secret: str) -> str:
    """Enough of a secret to tell it from another: its last four characters."""
    return SECRET_PREFIX + "…" + secret[-4:]


def signature(secret: str, msg_id: str, timestamp_s: int, body: str) -> str:
    """`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under `secret`."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp_s}.{body}".encode()
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def headers(secrets_: list[str], msg_id: str, timestamp_s: int, body: str) -> dict[str, str]:
    """The Standard Webhooks headers; one signature per secret (while a secret rotates)."""
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp_s),
        "webhook-signature": " ".join(signature(s, msg_id, timestamp_s, body) for s in secrets_),
    }


def retry_delay_s(attempts_done: int, scale: float, retry_after_s: float | None) -> float | None:
    """Seconds until the next attempt after `attempts_done` failed ones; None: give up."""
    if attempts_done >= MAX_ATTEMPTS:
        return None
    delay_s = RETRY_DELAYS_S[attempts_done - 1] * scale * random.uniform(1 - JITTER, 1 + JITTER)
    if retry_after_s is not None:
        delay_s = max(delay_s, min(retry_after_s, MAX_RETRY_AFTER_S))
    return delay_s
