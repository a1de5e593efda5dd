"""The Lua scripts of webhooks (webhook_*.lua), each declared by its arguments and its
answer; chatq/webhooks/deliveries.py and chatq/webhooks/store.py call them. Every key of the
webhooks is in the `{g}` slot: any of them routes a call there."""

from __future__ import annotations

from typing import Any, NamedTuple

from chatq import keys
from chatq.scripting import LuaScript


def _global_slot(args: Any) -> str:
    return keys.webhooks_due()


def decode_pairs(flat: list[Any]) -> list[tuple[str, str]]:
    """A flat answer {a, b, a, b, ...} as its pairs."""
    return list(zip(flat[::2], flat[1::2], strict=True))


class CreateArgs(NamedTuple):
    """webhook_create.lua: an endpoint made through the API, under its key's cap."""

    owned: str  # key: the key name's set of endpoint ids
    endpoint: str  # key: the new endpoint's hash
    id: str
    most: int
    fields: tuple[str, ...]  # field/value pairs


class AddArgs(NamedTuple):
    """webhook_add.lua: a delivery due now."""

    id: str
    endpoint: str
    owner: str
    made_here: bool  # the endpoint was made through the API
    ttl_s: int
    fields: tuple[str, ...]  # field/value pairs


class TakeArgs(NamedTuple):
    """webhook_take.lua: up to `limit` due deliveries for one worker."""

    hold_s: float
    limit: int
    endpoint_cap: int
    key_cap: int
    scan: int


class BeginArgs(NamedTuple):
    """webhook_begin.lua: a worker starts the attempt it took."""

    id: str
    token: str
    hold_s: float
    max_attempts: int


class Begun(NamedTuple):
    """webhook_begin.lua's answer: the delivery's record and Redis's time (None: the token
    was stale, or the delivery failed now)."""

    record: dict[str, str]
    now_s: float


def decode_begun(answer: list[Any]) -> Begun | None:
    """From {Redis time, field, value, ...}, or {}."""
    if not answer:
        return None
    now_s, *flat = answer
    return Begun(dict(decode_pairs(flat)), float(now_s))


class RenewArgs(NamedTuple):
    """webhook_renew.lua: a worker's attempts still running are held longer."""

    hold_s: float
    held: tuple[str, ...]  # (delivery id, token) pairs


class FinishArgs(NamedTuple):
    """webhook_finish.lua: one attempt recorded."""

    id: str
    token: str
    status: str
    attempt: str  # JSON object
    delay_s: float
    ttl_s: int
    disable: str  # an endpoint id to disable, or ''
    reason: str  # JSON, why it is disabled


class ForgetArgs(NamedTuple):
    """webhook_forget.lua: a page of a deleted endpoint's deliveries deleted."""

    endpoint: str
    page: int


CREATE = LuaScript("webhook_create.lua", CreateArgs, bool, keys=("owned", "endpoint"))
ADD = LuaScript("webhook_add.lua", AddArgs, bool, anchor=_global_slot)
TAKE = LuaScript("webhook_take.lua", TakeArgs, decode_pairs, anchor=_global_slot)
BEGIN = LuaScript("webhook_begin.lua", BeginArgs, decode_begun, anchor=_global_slot)
RENEW = LuaScript("webhook_renew.lua", RenewArgs, lambda ids: set(ids), anchor=_global_slot)
FINISH = LuaScript("webhook_finish.lua", FinishArgs, bool, anchor=_global_slot)
FORGET = LuaScript("webhook_forget.lua", ForgetArgs, int, anchor=_global_slot)
