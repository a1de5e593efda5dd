"""The Lua scripts of a batch's life (batch_*.lua), each declared by its arguments and its
answer; chatq/batches/store.py calls them. Every key of the batches is in the `{g}` slot: any of
them routes a call there."""

from __future__ import annotations

from typing import Any, NamedTuple

from chatq import keys
from chatq.scripting import LuaScript


def _global_slot(args: Any) -> str:
    return keys.batches_active()


def decode_held(answer: list[Any]) -> list[bool]:
    """batch_lease.lua's answer: per batch, whether the token holds its lease."""
    return [bool(h) for h in answer]


class CreateArgs(NamedTuple):
    """batch_create.lua: a new batch, unless its owner has max_active unfinished ones."""

    id: str
    owner: str
    file_id: str
    window_s: float
    max_active: int
    record: tuple[str, ...]  # field/value pairs


class CancelArgs(NamedTuple):
    """batch_cancel.lua: a client asks a running batch to stop."""

    id: str


class LeaseArgs(NamedTuple):
    """batch_lease.lua: take or renew the leases of batches for `token`."""

    token: str
    lease_ms: int
    ids: tuple[str, ...]


class AccountArgs(NamedTuple):
    """batch_account.lua: one line's result, recorded once."""

    id: str
    line: int
    kind: str  # 'o' (output file) or 'e' (error file)
    text: str
    outcome: str  # 'completed' or 'failed'
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    skipped: bool


class ValidatedArgs(NamedTuple):
    """batch_validated.lua: what validation found."""

    id: str
    token: str
    total: int
    invalid: int
    errors_json: str
    model: str


class FeedArgs(NamedTuple):
    """batch_feed.lua: the feeding cursor moves past the lines whose jobs exist."""

    id: str
    token: str
    old_line: int
    new_line: int
    offset: int
    lines: int
    done: bool


class AdvanceArgs(NamedTuple):
    """batch_advance.lua: expire or finalize a running batch when due."""

    id: str
    token: str
    op: str  # 'expire' or 'finalize'


class FinishArgs(NamedTuple):
    """batch_finish.lua: the batch ends with its files."""

    id: str
    token: str
    final: str
    ttl_s: int
    files: tuple[str | int, ...]  # (field, id, bytes, lines, name, expires_s) per file


CREATE = LuaScript(
    "batch_create.lua", CreateArgs, lambda answer: str(answer[0]), anchor=_global_slot
)
CANCEL = LuaScript("batch_cancel.lua", CancelArgs, str, anchor=_global_slot)
LEASE = LuaScript("batch_lease.lua", LeaseArgs, decode_held, anchor=_global_slot)
ACCOUNT = LuaScript("batch_account.lua", AccountArgs, bool, anchor=_global_slot)
VALIDATED = LuaScript("batch_validated.lua", ValidatedArgs, str, anchor=_global_slot)
FEED = LuaScript("batch_feed.lua", FeedArgs, bool, anchor=_global_slot)
ADVANCE = LuaScript("batch_advance.lua", AdvanceArgs, str, anchor=_global_slot)
FINISH = LuaScript("batch_finish.lua", FinishArgs, str, anchor=_global_slot)
