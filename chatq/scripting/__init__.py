"""The Lua scripts' loader and the prelude every script starts with."""

from chatq.scripting.loader import BoundScript, LuaScript, flat_pairs, is_cluster

__all__ = ["BoundScript", "LuaScript", "flat_pairs", "is_cluster"]
