"""The Lua scripts of chatq: each declared once by a LuaScript spec beside the Python that
calls it, loaded by one loader and called with named arguments.

A spec names its script's file (found by its name anywhere under the chatq package), its
arguments (a NamedTuple: the fields' order is the order on the wire, their types how the
script reads them), which of them are keys, the libraries it needs and how its answer is
decoded. The loader puts above the script the words every script shares (key prefixes,
shards, job kinds, status words), chatq/scripting/prelude.lua, the libraries, and a `local` per
argument, so that no script indexes ARGV or its named KEYS by number:

    local id = ARGV[1]
    local lease_s = tonumber(ARGV[2])

An optional number (`int | None`) is nil when None. A variadic last argument (a tuple: the
record's field/value pairs, pieces, ids) is flattened onto the end of ARGV (or KEYS) and the
header gives its first index, `local caps_at = 6`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import cache
from itertools import chain
from pathlib import Path
from types import UnionType
from typing import Any, Generic, NamedTuple, ParamSpec, TypeVar, get_args, get_type_hints

from redis.cluster import RedisCluster
from redis.commands.core import Script

import chatq
from chatq import keys, words

# The whole package, wherever this module sits in it: a script's file lives beside its caller.
PACKAGE_DIR = Path(chatq.__file__).parent
PRELUDE = "prelude.lua"
P = ParamSpec("P")
A = TypeVar("A", bound=tuple[Any, ...])
R = TypeVar("R")
T = TypeVar("T")
Arg = str | int | float


def is_cluster(client: Any) -> bool:
    """Whether `client` talks to a Redis Cluster (each script then touches one slot)."""
    return isinstance(client, RedisCluster)


@cache
def lua_files() -> dict[str, Path]:
    """Every Lua file under the chatq package, by its file name (which is unique)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.lua")):
        if path.name in found:
            raise RuntimeError(f"two Lua files named {path.name}: {found[path.name]}, {path}")
        found[path.name] = path
    return found


def lua_text(file: str) -> str:
    """The text of the Lua file `file` (a name such as "claim.lua")."""
    return lua_files()[file].read_text()


def _words(sharded: bool) -> str:
    shared = {
        "P": keys.PREFIX,
        "G": keys.GLOBAL,
        "SHARDS": keys.SHARDS,
        "QUEUED": words.QUEUED,
        "IN_PROGRESS": words.IN_PROGRESS,
        "COMPLETED": words.COMPLETED,
        "FAILED": words.FAILED,
        "CANCELLED": words.CANCELLED,
        "SHARDED": sharded,
    }
    header = "".join(f"local {name} = {json.dumps(value)}\n" for name, value in shared.items())
    kinds = ", ".join(f"{kind} = true" for kind in keys.JOB_KINDS)
    return header + f"local JOB_KINDS = {{{kinds}}}\n"


class Field(NamedTuple):
    """One argument of a script as its header reads it."""

    name: str
    kind: type
    variadic: bool
    optional: bool  # None may stand for it (nil in the script)


def _fields(args: Callable[..., Any]) -> list[Field]:
    hints = get_type_hints(args)
    fields: list[Field] = []
    for name in args._fields:  # type: ignore[attr-defined]
        hint = hints[name]
        variadic = getattr(hint, "__origin__", None) is tuple
        optional = isinstance(hint, UnionType) and type(None) in get_args(hint)
        if optional:  # `int | None`
            hint = next(arg for arg in get_args(hint) if arg is not type(None))
        fields.append(Field(name, str if variadic else hint, variadic, optional))
    return fields


def _read(table: str, index: int, field: Field) -> str:
    """The Lua that reads `field` from `table` at `index`."""
    if field.variadic:
        return f"local {field.name}_at = {index}\n"
    item = f"{table}[{index}]"
    if field.kind is bool:
        return f"local {field.name} = {item} == '1'\n"
    if field.kind in (int, float):
        return f"local {field.name} = tonumber({item})\n"
    return f"local {field.name} = {item}\n"


class _Encoder:
    """Puts values on the wire as the header of `fields` reads them: bools as '1'/'0', None
    as '' (nil in the script), a variadic last field laid out in place. Worked out once per
    spec: a call only copies its values."""

    def __init__(self, fields: list[Field]) -> None:
        self.variadic = bool(fields) and fields[-1].variadic
        fixed = fields[:-1] if self.variadic else fields
        self.fixed = len(fixed)
        self.bools = tuple(i for i, f in enumerate(fixed) if f.kind is bool)
        self.nullable = any(f.optional for f in fixed)

    def __call__(self, values: tuple[Any, ...]) -> list[Any]:
        out = list(values[: self.fixed])
        for i in self.bools:
            out[i] = "1" if out[i] else "0"
        if self.nullable:
            out = ["" if v is None else v for v in out]
        if self.variadic:
            out += values[self.fixed]
        return out


class LuaScript(Generic[P, A, R]):
    """One Lua script's spec: its file, its arguments (`args`, a NamedTuple class; the
    fields named in `keys` are its KEYS), the `libraries` (Lua files) loaded before it, how
    its answer is decoded (`answer`), and, for a script whose keys are not named, `anchor`:
    a key of the slot it works in (a Cluster routes the call by it)."""

    def __init__(
        self,
        file: str,
        args: Callable[P, A],
        answer: Callable[[Any], R],
        *,
        keys: tuple[str, ...] = (),
        anchor: Callable[[A], str] | None = None,
        libraries: tuple[str, ...] = (),
    ) -> None:
        self.file = file
        self.name = file.removesuffix(".lua")
        self.args = args
        self.answer = answer
        self.keys = keys
        self.anchor = anchor
        self.libraries = libraries
        self.fields = _fields(args)
        self._keys = _Encoder(self.fields[: len(keys)])
        self._argv = _Encoder(self.fields[len(keys) :])
        names = [f.name for f in self.fields]
        if names[: len(keys)] != list(keys):
            raise ValueError(f"{file}: keys {keys} must be the first arguments of {names}")
        if (anchor is None) == (not keys):
            raise ValueError(f"{file}: give either named keys or an anchor")

    def header(self) -> str:
        """The `local` of each argument, as the script reads it."""
        lines = [_read("KEYS", i + 1, f) for i, f in enumerate(self.fields[: len(self.keys)])]
        lines += [_read("ARGV", i + 1, f) for i, f in enumerate(self.fields[len(self.keys) :])]
        return "".join(lines)

    @cache  # noqa: B019 (specs are module constants: they live as long as the process)
    def source(self, sharded: bool = False) -> str:
        """The script with everything above it; `sharded`: for a Redis Cluster."""
        parts = [_words(sharded), lua_text(PRELUDE)]
        parts += [lua_text(library) for library in self.libraries]
        return "".join([*parts, self.header(), lua_text(self.file)])

    def wire(self, args: A) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV of a call with `args`."""
        n = len(self.keys)
        argv: list[Arg] = self._argv(args[n:])
        if self.anchor is not None:
            return [self.anchor(args)], argv
        return [str(key) for key in self._keys(args[:n])], argv

    def on(self, client: Any) -> BoundScript[P, A, R]:
        """The script registered on `client`, for a Cluster if it is one."""
        return BoundScript(self, client.register_script(self.source(is_cluster(client))))


class BoundScript(Generic[P, A, R]):
    """A LuaScript registered on a client (EVALSHA, loaded again on NOSCRIPT)."""

    def __init__(self, spec: LuaScript[P, A, R], script: Script) -> None:
        self.spec = spec
        self.script = script

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the script with these arguments; its decoded answer."""
        return self.spec.answer(self.send(None, self.spec.args(*args, **kwargs)))

    def send(self, client: Any, args: A) -> Any:
        """Run the script with `args` on `client` (a pipeline, say; None: its own client);
        its raw answer (a pipeline's comes from its execute)."""
        wire_keys, argv = self.spec.wire(args)
        return self.script(keys=wire_keys, args=argv, client=client)


def flat_pairs(items: Iterable[tuple[T, ...]]) -> tuple[T, ...]:
    """Tuples laid end to end, as a variadic argument carries them."""
    return tuple(chain.from_iterable(items))
