"""Every Lua script is declared by a spec (chatq/scripting/loader.py LuaScript): its arguments are
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
from chatq.admission.quotas import ADMIT
from chatq.jobs.scripts import CLAIM, CREATE
from chatq.scripting.loader import PRELUDE, LuaScript, lua_files


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
    assert set(lua_files()) == scripts | libraries
    assert not scripts & libraries


def test_no_lua_reads_its_arguments_by_number() -> None:
    by_number = re.compile(r"ARGV\[\s*\d")
    for name, path in lua_files().items():
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


def test_the_header_names_each_argument_as_the_script_reads_it() -> None:
    header = CLAIM.header()
    assert header.splitlines() == [
        "local id = ARGV[1]",
        "local run = ARGV[2]",
        "local lease_s = tonumber(ARGV[3])",
        "local park_s = tonumber(ARGV[4])",
        "local cap = tonumber(ARGV[5])",
        "local caps_at = 6",
    ]
    assert CREATE.header().splitlines()[7] == "local may_exist = ARGV[8] == '1'"
    assert ADMIT.header().startswith("local state = KEYS[1]\nlocal held = KEYS[2]\n")
    assert ADMIT.header().splitlines()[2] == "local mode = ARGV[1]"


def test_a_call_puts_each_argument_where_its_header_reads_it() -> None:
    args = CLAIM.args(id="job_x", run="r", lease_s=1.5, park_s=2, cap=0, caps=("alice", 3))
    assert CLAIM.wire(args) == (["chatq:{jx}:job:job_x"], ["job_x", "r", 1.5, 2, 0, "alice", 3])
    created = CREATE.args(
        id="job_x",
        ttl_s=1,
        lease_s=1,
        flight="",
        max_followers=1,
        mode="queue",
        text="",
        may_exist=True,
        queue="",
        message="",
        record=("a", "b"),
    )
    assert CREATE.wire(created)[1][7:] == ["1", "", "", "a", "b"]
