"""A request's JSON object converted to the struct that declares it, or refused with the API's
400 naming the field: the one check of every request body (chat, Responses, batches, files,
webhooks) against its msgspec `Struct`, whose types and `Meta`s are the rules (bounds,
lengths, values). Nothing here knows a field.

The conversion is strict (a bool is no number), but a whole number written `1.0` where the
struct says integer is that integer, as JSON Schema reads it, and a top-level field sent as
null is as absent, as OpenAI's API reads it. msgspec's error names the place
(`$.input[0].role`); its words are not the API's: the message is written here from the
struct's type. `param` names the field down to the first one that is no object the struct
declares, as OpenAI's does: `stop` (not `stop[1]`), `messages[0].content`, `metadata`.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import msgspec
from msgspec import inspect

from chatq.chat.json_input import MAX_PARAM_CHARS
from chatq.chat.type_words import describe, members_of
from chatq.errors import ApiError

T = TypeVar("T")
_AT = re.compile(r"(?P<reason>.*?)(?: - at `\$(?P<path>.*)`)?\Z", re.DOTALL)
_MISSING = re.compile(r"Object missing required field `(.*)`\Z", re.DOTALL)
_UNKNOWN = re.compile(r"Object contains unknown field `(.*)`\Z", re.DOTALL)
_INDEX = re.compile(r"\[(\d+|\.\.\.)\]")
_NOTHING = object()


class Refused(ApiError):
    """400: the field `param` is missing (`missing_field`), not one the struct has
    (`unknown`), or not what it takes (`expected`, the struct's words; `got`, what it held)."""

    def __init__(
        self, code: str, message: str, param: str, *, unknown: bool = False, expected: str = ""
    ) -> None:
        super().__init__(400, code, message, param=param)
        self.unknown, self.expected = unknown, expected
        self.got: Any = None


def convert(body: dict[str, Any], struct: type[T], *, lax: bool = False) -> T:
    """`body` as `struct`; `lax` reads numbers from strings (a form's fields). The whole
    numbers it makes integers are made so in `body` too, which goes on as it is."""
    info, may_hold_int = _info(struct)
    if may_hold_int and not lax:
        _whole(body, info)
    sent = body
    if None in body.values():
        sent = {name: value for name, value in body.items() if value is not None}
    try:
        return msgspec.convert(sent, struct, strict=not lax)
    except msgspec.ValidationError as error:
        raise _refusal(str(error), sent, info) from None


_INFOS: dict[type[Any], tuple[inspect.Type, bool]] = {}


def _info(struct: type[Any]) -> tuple[inspect.Type, bool]:
    """The struct's type, and whether it may hold an integer: one that cannot (a batch's
    line) is not walked for whole numbers."""
    if struct not in _INFOS:
        info = inspect.type_info(struct)
        _INFOS[struct] = info, _may_hold_int(info)
    return _INFOS[struct]


def _holding(t: inspect.Type, value: Any) -> inspect.Type | None:
    """The member of `t` that holds `value`'s kind of JSON value, if one does."""
    members = members_of(t)
    if isinstance(value, float):
        kinds: tuple[type, ...] = (inspect.FloatType, inspect.IntType)
        return next((m for k in kinds for m in members if isinstance(m, k)), None)
    if isinstance(value, list):
        return next((m for m in members if isinstance(m, inspect.ListType)), None)
    if not isinstance(value, dict):
        return None
    objects = [m for m in members if isinstance(m, inspect.StructType | inspect.DictType)]
    return next((m for m in objects if _tag_fits(m, value)), None)


def _tag_fits(t: inspect.Type, value: dict[str, Any]) -> bool:
    """Whether `value` has the tag of `t`, a member of a tagged union (else: True)."""
    if not isinstance(t, inspect.StructType) or t.tag_field is None:
        return True
    return bool(value.get(t.tag_field) == t.tag)


def _whole(value: Any, t: inspect.Type) -> Any:
    """`value` with every whole float that `t` types as an integer made an int, in place."""
    if not isinstance(value, float | list | dict):
        return value  # only a float is made an int; only an array or an object holds one
    held = _holding(t, value)
    children: list[tuple[Any, inspect.Type]]
    if isinstance(value, float):
        whole = isinstance(held, inspect.IntType) and value.is_integer()
        return int(value) if whole else value
    if isinstance(held, inspect.StructType):
        children = [(name, f) for name, f in _int_fields(held) if name in value]
    elif isinstance(held, inspect.DictType) and _may_hold_int(held.value_type):
        children = [(key, held.value_type) for key in value]
    elif isinstance(held, inspect.ListType) and _may_hold_int(held.item_type):
        children = [(index, held.item_type) for index in range(len(value))]
    else:
        return value
    for key, child in children:
        value[key] = _whole(value[key], child)
    return value


# Known of each type, by its id (the types live in _INFOS for good): whether it may hold
# an integer, and a struct's fields that may. Every request is walked by these only.
_HOLDS_INT: dict[int, bool] = {}
_INT_FIELDS: dict[int, list[tuple[str, inspect.Type]]] = {}


def _int_fields(t: inspect.StructType) -> list[tuple[str, inspect.Type]]:
    if id(t) not in _INT_FIELDS:
        _INT_FIELDS[id(t)] = [(f.encode_name, f.type) for f in t.fields if _may_hold_int(f.type)]
    return _INT_FIELDS[id(t)]


def _may_hold_int(t: inspect.Type) -> bool:
    if id(t) not in _HOLDS_INT:
        _HOLDS_INT[id(t)] = any(_holds_int(m) for m in members_of(t))
    return _HOLDS_INT[id(t)]


def _holds_int(t: inspect.Type) -> bool:
    if isinstance(t, inspect.StructType):
        return bool(_int_fields(t))
    inner = getattr(t, "item_type", None) or getattr(t, "value_type", None)
    return isinstance(t, inspect.IntType) or (inner is not None and _may_hold_int(inner))


def _structural(t: inspect.Type) -> bool:
    """Whether `t` may be an object the struct declares, or a list of them."""
    for m in members_of(t):
        inner = members_of(m.item_type) if isinstance(m, inspect.ListType) else [m]
        if any(isinstance(i, inspect.StructType) for i in inner):
            return True
    return False


Step = tuple[str, str | int, inspect.Type]  # as msgspec writes it, the key, the type there


def _step(t: inspect.Type, path: str) -> Step | None:
    """The first step of msgspec's `path` (`.name`, `[0]`, `[...]`) from a value of type `t`;
    None if `t` has no such step."""
    members = members_of(t)
    index = _INDEX.match(path)
    if index:
        lists = [m.item_type for m in members if isinstance(m, inspect.ListType)]
        maps = [m.value_type for m in members if isinstance(m, inspect.DictType)]
        found = maps if index.group(1) == "..." else lists
        key = -1 if index.group(1) == "..." else int(index.group(1))  # a map's key: unsaid
        return (index.group(0), key, found[0]) if found else None
    structs = [m for m in members if isinstance(m, inspect.StructType)]
    tags = tuple(m.tag for m in structs if m.tag_field and path == f".{m.tag_field}")
    if tags:
        return path, path[1:], inspect.LiteralType(tags)
    fields = sorted((f for s in structs for f in s.fields), key=lambda f: -len(f.encode_name))
    for field in fields:
        step = f".{field.encode_name}"
        if path.startswith(step) and path[len(step) : len(step) + 1] in ("", ".", "["):
            return step, field.encode_name, field.type
    return None


def _field(t: inspect.Type, path: str) -> tuple[list[Step], inspect.Type]:
    """The steps of `path` that `param` names, and the type there: down to the first field
    that is no object the struct declares, nor a list of them."""
    steps: list[Step] = []
    while path and (not steps or _structural(t)):
        found = _step(t, path)
        if found is None:
            break
        steps.append(found)
        t, path = found[2], path[len(found[0]) :]
    return steps, t


def _value_at(value: Any, steps: list[Step]) -> Any:
    for _, key, _type in steps:
        try:
            value = value[key]
        except (LookupError, TypeError):
            return _NOTHING
    return value


def _param(path: str) -> str:
    return path.lstrip(".")[:MAX_PARAM_CHARS]


def _refusal(text: str, sent: dict[str, Any], info: inspect.Type) -> Refused:
    at = _AT.match(text)
    reason, path = (at.group("reason"), at.group("path") or "") if at else (text, "")
    if named := _MISSING.match(reason):
        param = _param(f"{path}.{named.group(1)}")
        return Refused("missing_field", f"`{param}` is required.", param)
    if named := _UNKNOWN.match(reason):
        param = _param(f"{path}.{named.group(1)}")
        return Refused("invalid_request", f"`{param}` is not supported here.", param, unknown=True)
    steps, t = _field(info, path)
    param = _param("".join(step for step, _, _ in steps))
    expected, got = describe(t), _value_at(sent, steps)
    message = f"`{param}` must be {expected}{_got(got)}."
    refused = Refused("invalid_request", message, param, expected=expected)
    refused.got = None if got is _NOTHING else got
    return refused


def _got(value: Any) -> str:
    if value is _NOTHING or isinstance(value, dict | list):
        return ""
    return f" (got {json.dumps(value)[:40]})"
