"""The Lua scripts of chatq/lua/: each behind the names it shares, registered on a client."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from redis.cluster import RedisCluster
from redis.commands.core import Script

from chatq import jobs, keys

LUA_DIR = Path(__file__).with_name("lua")


def is_cluster(client: Any) -> bool:
    """Whether `client` talks to a Redis Cluster (each script then touches one slot)."""
    return isinstance(client, RedisCluster)


@cache
def lua_source(name: str, sharded: bool = False) -> str:
    """The script `name`, behind the key prefixes, the status words and the shared helpers;
    `sharded`: for a Redis Cluster (sharded pub/sub)."""
    words = {
        "P": keys.PREFIX,
        "G": keys.GLOBAL,
        "SHARDS": keys.SHARDS,
        "QUEUED": jobs.QUEUED,
        "IN_PROGRESS": jobs.IN_PROGRESS,
        "COMPLETED": jobs.COMPLETED,
        "FAILED": jobs.FAILED,
        "CANCELLED": jobs.CANCELLED,
        "SHARDED": sharded,
    }
    header = "".join(f"local {name} = {json.dumps(value)}\n" for name, value in words.items())
    prelude = (LUA_DIR / "prelude.lua").read_text()
    return header + prelude + (LUA_DIR / f"{name}.lua").read_text()


def register(client: Any, name: str) -> Script:
    """The script `name` registered on `client`, for a Cluster if it is one."""
    script: Script = client.register_script(lua_source(name, is_cluster(client)))
    return script
