"""The Lua scripts' loader and the prelude every script starts with."""
