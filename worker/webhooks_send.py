"""One webhook attempt over HTTP: signed, through the guarded session, redirects not followed,
and what came of it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import requests

from chatq import webhooks
from chatq.webhooks_net import refused
from chatq.webhooks_store import Endpoint

USER_AGENT = "chatq-webhooks/1"
DELIVERED = "delivered"
GONE = "gone"


@dataclass(frozen=True)
class Sent:
    """What an attempt came to: `outcome` is delivered, gone (410), redirect, http_error,
    timeout, connection_error or refused; `retry_after_s` is the receiver's wish."""

    outcome: str
    status_code: int | None
    duration_s: float
    retry_after_s: float | None = None


def retry_after_s(value: str | None, now_s: float) -> float | None:
    """Seconds a `Retry-After` header asks for (a number or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now_s)
    except (TypeError, ValueError, OverflowError):
        return None


def _outcome(status_code: int) -> str:
    if 200 <= status_code < 300:
        return DELIVERED
    if status_code == 410:
        return GONE
    return "redirect" if 300 <= status_code < 400 else "http_error"


def _failure(exc: requests.RequestException) -> str:
    if refused(exc):
        return "refused"
    # A read timeout while reading the body surfaces as a ConnectionError.
    if isinstance(exc, requests.Timeout) or "timed out" in str(exc).lower():
        return "timeout"
    return "connection_error"


def send(
    session: requests.Session,
    endpoint: Endpoint,
    record: dict[str, str],
    now_s: float,
    timeout_s: float,
) -> Sent:
    """POST the delivery's event to `endpoint`, signed at `now_s` (Redis's clock)."""
    body = record["body"]
    headers = webhooks.headers(endpoint.signing_secrets(now_s), record["event"], int(now_s), body)
    headers["user-agent"] = USER_AGENT
    started = time.monotonic()
    try:
        with session.post(
            endpoint.url,
            data=body.encode(),
            headers=headers,
            stream=True,
            timeout=(timeout_s, timeout_s),
            allow_redirects=False,
        ) as response:
            code = response.status_code
            wish = retry_after_s(response.headers.get("Retry-After"), now_s)
        return Sent(_outcome(code), code, time.monotonic() - started, wish)
    except requests.RequestException as exc:
        return Sent(_failure(exc), None, time.monotonic() - started)
