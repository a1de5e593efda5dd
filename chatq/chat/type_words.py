"""What a msgspec type takes, in words, for the API's 400s: chatq/chat/typed_input.py names
the field, and these words, read from the field's type, say what it must be."""

from __future__ import annotations

import json
from typing import Any

from msgspec import inspect


def members_of(t: inspect.Type) -> list[inspect.Type]:
    """The types `t` may be: a union's members, its Meta's wrapping taken off."""
    while isinstance(t, inspect.Metadata):
        t = t.type
    if isinstance(t, inspect.UnionType):
        return [m for member in t.types for m in members_of(member)]
    return [t]


def describe(t: inspect.Type) -> str:
    """What a value of type `t` is, in words: `an integer from 1 to 128`, `one of "auto",
    "none"`, `a string, or an array of 1 to 4 items, each a string`."""
    members = members_of(t)
    tagged = [m for m in members if isinstance(m, inspect.StructType) and m.tag_field]
    words = [_words(m) for m in members if m not in tagged]
    if tagged:
        tags = _choice(tuple(m.tag for m in tagged))
        words.insert(0, f"an object whose `{tagged[0].tag_field}` is {tags}")
    return ", or ".join(dict.fromkeys(words))


def _choice(values: tuple[Any, ...]) -> str:
    shown = ", ".join(json.dumps(v) for v in values)
    return shown if len(values) == 1 else f"one of {shown}"


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _bounds(t: inspect.IntType | inspect.FloatType) -> str:
    if t.ge is not None and t.le is not None:
        return f" from {_number(t.ge)} to {_number(t.le)}"
    words = (("of at least", t.ge), ("above", t.gt), ("of at most", t.le), ("below", t.lt))
    said = [f"{word} {_number(bound)}" for word, bound in words if bound is not None]
    return " " + " and ".join(said) if said else ""


def _length(least: int | None, most: int | None, unit: str) -> str:
    def units(n: int) -> str:
        return f"{n} {unit}" + ("" if n == 1 else "s")

    if least and most is not None:
        return f" of {least} to {units(most)}" if least != most else f" of {units(most)}"
    if least:
        return f" of at least {units(least)}"
    return f" of at most {units(most)}" if most is not None else ""


def _words(t: inspect.Type) -> str:
    """One member of a type, in words."""
    if isinstance(t, inspect.LiteralType):
        return _choice(t.values)
    if isinstance(t, inspect.IntType | inspect.FloatType):
        noun = "an integer" if isinstance(t, inspect.IntType) else "a number"
        return noun + _bounds(t)
    if isinstance(t, inspect.StrType):
        pattern = f" matching `{t.pattern}`" if t.pattern else ""
        return "a string" + _length(t.min_length, t.max_length, "character") + pattern
    if isinstance(t, inspect.ListType | inspect.DictType):
        return _collection(t)
    return _SIMPLE.get(type(t), "an object")


def _collection(t: inspect.ListType | inspect.DictType) -> str:
    """An array or an object: its length, its keys' and its items' (or values') types."""
    noun = "array" if isinstance(t, inspect.ListType) else "object"
    if t.max_length == 0:
        return f"an empty {noun}"
    if isinstance(t, inspect.ListType):
        unit, item, each, keys = "item", t.item_type, "each", ""
    else:
        unit, item, each = "pair", t.value_type, "each value"
        most_chars = getattr(t.key_type, "max_length", None)
        keys = f", keys of at most {most_chars} characters" if most_chars else ""
    words = "" if isinstance(item, inspect.AnyType) else f", {each} {describe(item)}"
    return f"an {noun}" + _length(t.min_length, t.max_length, unit) + keys + words


_SIMPLE: dict[type, str] = {
    inspect.BoolType: "true or false",
    inspect.NoneType: "null",
    inspect.AnyType: "any JSON value",
}
