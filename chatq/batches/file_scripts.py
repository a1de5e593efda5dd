"""The Lua scripts of files and their quotas (file_*.lua), each declared by its arguments and its
answer; chatq/batches/file_records.py and chatq/batches/file_quota.py call them. Every key of the
files is in the `{g}` slot: any of them routes a call there."""

from __future__ import annotations

from typing import Any, NamedTuple

from chatq import keys
from chatq.scripting import LuaScript


class AddArgs(NamedTuple):
    """file_add.lua: a committed upload becomes its owner's file."""

    meta: tuple[str, ...]  # the metadata's field/value pairs


class DeleteArgs(NamedTuple):
    """file_delete.lua: a file's metadata deleted, unless a batch reads it."""

    id: str
    owner: str  # '' for the janitor: only a file that has expired


class HoldArgs(NamedTuple):
    """file_hold.lua: an upload holds room in its key's quota."""

    owner: str
    id: str
    need: int
    want: int
    max_bytes: int
    max_files: int
    hold_s: int


class Held(NamedTuple):
    """file_hold.lua's answer: `kind` 'held' (then `value` is the bytes held), or the quota
    it would pass: 'bytes' (the bytes the key's files take) or 'files' (their count)."""

    kind: str
    value: int


def decode_held(answer: list[Any]) -> Held:
    """From {kind, value} (`kind` as bytes on a client that does not decode)."""
    kind, value = answer
    return Held(kind.decode() if isinstance(kind, bytes) else str(kind), int(value))


class UnholdArgs(NamedTuple):
    """file_unhold.lua: an upload ended without a file."""

    owner: str
    id: str


def _global_slot(args: Any) -> str:
    return keys.files_expiry()


ADD = LuaScript("file_add.lua", AddArgs, bool, anchor=_global_slot)
DELETE = LuaScript("file_delete.lua", DeleteArgs, str, anchor=_global_slot)
HOLD = LuaScript("file_hold.lua", HoldArgs, decode_held, anchor=_global_slot)
UNHOLD = LuaScript("file_unhold.lua", UnholdArgs, bool, anchor=_global_slot)
