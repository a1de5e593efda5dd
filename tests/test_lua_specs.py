"""Every Lua script is declared by a spec (chatq/lua_scripts.py LuaScript): its arguments are
named there and read by the header the loader writes, never by number; and every spec's
script, with what the loader puts above it, loads in a real Redis (on one and on a Cluster's
terms)."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest
import redis

import chatq
from chatq.lua_scripts import PRELUDE, LuaScript, lua_files

# Scripts still called by position (ARGV by number), to move behind a spec.
NOT_YET = {
    "broker_sent.lua",
    "file_add.lua",
    "file_delete.lua",
    "file_hold.lua",
    "file_unhold.lua",
    "missing.lua",
    "pacing.lua",
    "webhook_add.lua",
    "webhook_begin.lua",
    "webhook_create.lua",
    "webhook_finish.lua",
    "webhook_forget.lua",
    "webhook_renew.lua",
    "webhook_take.lua",
}


def specs() -> list[LuaScript[..., tuple[object, ...], object]]:
    """Every LuaScript declared at the top of a chatq module."""
    found = []
    for module in pkgutil.walk_packages(chatq.__path__, "chatq."):
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, LuaScript):
                found.append(value)
    return found


def test_every_lua_file_is_a_spec_s_script_or_a_library() -> None:
    scripts = {spec.file for spec in specs()}
    libraries = {PRELUDE} | {lib for spec in specs() for lib in spec.libraries}
    assert set(lua_files()) - NOT_YET == scripts | libraries
    assert not scripts & libraries


def test_no_lua_reads_its_arguments_by_number() -> None:
    by_number = re.compile(r"ARGV\[\s*\d")
    for name, path in lua_files().items():
        if name not in NOT_YET:
            assert not by_number.search(path.read_text()), name


def test_named_keys_are_read_by_name() -> None:
    for spec in specs():
        if spec.keys:
            assert not re.search(r"KEYS\[\s*\d", lua_files()[spec.file].read_text()), spec.file


@pytest.mark.parametrize("sharded", [False, True])
def test_every_spec_s_script_loads(redis_url: str, sharded: bool) -> None:
    client = redis.Redis.from_url(redis_url)
    for spec in specs():
        assert client.script_load(spec.source(sharded)), spec.file
