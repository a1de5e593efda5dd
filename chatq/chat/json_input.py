"""A client's JSON (a request body, a batch line), parsed into what every later step can
carry, or refused with a 400 naming the field.

Python's json module reads `1e400` as infinity and keeps a `\\ud800` escape as a lone
surrogate. Neither can be sent on: json.dumps writes infinity as `Infinity`, which is not
JSON, and UTF-8 has no encoding for a surrogate. A job made of them would fail in the worker,
so they are refused where the text is parsed, as I-JSON (RFC 7493) refuses them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from chatq.errors import ApiError

NUMBER_OUT_OF_RANGE = "number_out_of_range"
INVALID_UNICODE = "invalid_unicode"
# A `\uD800`-`\uDFFF` escape: only a text that has one can hold a lone surrogate (the UTF-8
# decoder refuses an encoded surrogate), so only such a text is searched for one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_PARAM_CHARS = 200


class _NotFinite(ValueError):
    pass


class NestedTooDeeply(ValueError):
    """JSON whose arrays and objects nest deeper than the parser's recursion allows (about
    900 levels): said as such, not as text that is not JSON."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


# One decoder each, made once: json.loads with an option builds a new one per call.
_STRICT = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
_LENIENT = json.JSONDecoder(parse_constant=_no_constant)


def _step(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _children(value: object) -> list[tuple[str | int, object]]:
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return list(enumerate(value))
    return []


def _find(value: object, bad: Callable[[object], bool]) -> str | None:
    """The path (`messages[0].content`) of the first value `bad` says is bad, or of the
    object with a key it says is bad ("" for the whole document); None if there is none."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if bad(item) or (isinstance(item, dict) and any(bad(key) for key in item)):
            return path
        stack.extend((_step(path, key), child) for key, child in reversed(_children(item)))
    return None


def _not_finite(value: object) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _lone_surrogate(value: object) -> bool:
    return isinstance(value, str) and _LONE_SURROGATE.search(value) is not None


def _refusal(path: str | None, code: str, what: str) -> ApiError:
    param = path[:MAX_PARAM_CHARS] if path else None
    where = f"`{param}`" if param else "The JSON"
    return ApiError(400, code, f"{where} {what}", param=param)


def parse(text: str) -> Any:
    """The JSON `text`, parsed. ValueError when it is not JSON (NaN and Infinity are not),
    NestedTooDeeply (a ValueError) when it nests too deeply to parse;
    ApiError 400 `number_out_of_range` for a number beyond a 64-bit float's range, and
    `invalid_unicode` for a string (or key) holding a lone UTF-16 surrogate, `param` naming
    the field."""
    try:
        value = _STRICT.decode(text)
    except RecursionError:
        raise NestedTooDeeply("nests arrays and objects too deeply to be read") from None
    except _NotFinite:
        path = _find(_LENIENT.decode(text), _not_finite)
        raise _refusal(
            path, NUMBER_OUT_OF_RANGE, "is a number beyond the range of a 64-bit float."
        ) from None
    if _SURROGATE_ESCAPE.search(text):
        path = _find(value, _lone_surrogate)
        if path is not None:
            raise _refusal(
                path,
                INVALID_UNICODE,
                "holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair), "
                "which is no character and cannot be sent on as UTF-8.",
            )
    return value
