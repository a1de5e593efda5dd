"""Per-request behaviour knobs, parsed from the model name `fake:key=value,...`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MODEL_ID = "fake"

_MAX_SECONDS = 86_400.0
_MAX_TOKENS = 100_000


class UnknownModelError(ValueError):
    """The model name is not `fake` or `fake:...`."""


class KnobError(ValueError):
    """A knob is unknown, repeated or has a bad value."""


@dataclass(frozen=True, slots=True)
class Knobs:
    """How fakellm should behave for one request."""

    ttft_s: float = 0.0
    tps: float = 0.0
    tokens: int | None = None
    status: int | None = None
    fail_first: int | None = None
    retry_after_s: float | None = None
    hang: bool = False
    drop_after: int | None = None
    garbage: bool = False

    @property
    def fails(self) -> bool:
        """Whether any failure knob is set."""
        return self.hang or self.garbage or self.status is not None or self.drop_after is not None

    @property
    def retry_after_header(self) -> str | None:
        """The `Retry-After` header value, if any."""
        return None if self.retry_after_s is None else f"{self.retry_after_s:g}"


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or not 0 <= value <= _MAX_SECONDS:
        raise ValueError(f"must be a number of seconds between 0 and {_MAX_SECONDS:g}")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a non-negative number")
    return value


def _count(text: str) -> int:
    value = int(text)
    if not 0 <= value <= _MAX_TOKENS:
        raise ValueError(f"must be an integer between 0 and {_MAX_TOKENS}")
    return value


def _status(text: str) -> int:
    value = int(text)
    if not 400 <= value <= 599:
        raise ValueError("must be an HTTP error status between 400 and 599")
    return value


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError("must be 0 or 1")
    return text == "1"


# knob name -> (Knobs field, converter)
_KNOBS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "ttft": ("ttft_s", _seconds),
    "tps": ("tps", _rate),
    "tokens": ("tokens", _count),
    "status": ("status", _status),
    "fail_first": ("fail_first", _count),
    "retry_after": ("retry_after_s", _seconds),
    "hang": ("hang", _flag),
    "drop_after": ("drop_after", _count),
    "garbage": ("garbage", _flag),
}

# What each knob does, for `python -m fakellm --help` and the README: name -> (meaning,
# default, example). tests/test_fakellm_knobs.py checks it names every knob of _KNOBS.
KNOB_HELP: dict[str, tuple[str, str, str]] = {
    "ttft": ("seconds before the first token", "0", "fake:ttft=0.5"),
    "tps": ("tokens per second after the first (0: all at once)", "0", "fake:tps=20,tokens=40"),
    "tokens": (
        "number of tokens (words) to answer, derived from the request",
        "echo of the last user message",
        "fake:tokens=100",
    ),
    "status": (
        "answer this HTTP status (400-599) with an OpenAI error body instead",
        "none (succeed)",
        "fake:status=503",
    ),
    "fail_first": (
        "fail only the first N attempts of this same request, then succeed "
        "(with status, hang, drop_after or garbage)",
        "every attempt",
        "fake:status=503,fail_first=2",
    ),
    "retry_after": (
        "seconds to send in Retry-After with `status`",
        "none",
        "fake:status=429,retry_after=1",
    ),
    "hang": ("1: accept the request and never answer", "0", "fake:hang=1"),
    "drop_after": (
        "cut the connection after this many streamed tokens",
        "never",
        "fake:drop_after=3,tokens=10",
    ),
    "garbage": ("1: answer 200 with a body that is not valid JSON or SSE", "0", "fake:garbage=1"),
}


def _convert(name: str, text: str) -> tuple[str, Any]:
    if name not in _KNOBS:
        raise KnobError(f"unknown knob {name!r}; known knobs: {', '.join(_KNOBS)}")
    field, converter = _KNOBS[name]
    try:
        return field, converter(text.strip())
    except ValueError as exc:
        raise KnobError(f"knob {name}={text!r}: {exc}") from None


def _split(spec: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in spec.split(","):
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep:
            raise KnobError(f"knob {item!r} is not key=value")
        if name in pairs:
            raise KnobError(f"knob {name!r} is given twice")
        pairs[name] = text
    return pairs


def _check_combination(knobs: Knobs) -> None:
    if knobs.retry_after_s is not None and knobs.status is None:
        raise KnobError("knob retry_after needs status")
    if knobs.fail_first is not None and not knobs.fails:
        raise KnobError("knob fail_first needs status, hang, drop_after or garbage")


def parse_model(model: str) -> Knobs:
    """Parse `fake` or `fake:key=value,...` into knobs."""
    name, sep, spec = model.partition(":")
    if name != MODEL_ID:
        raise UnknownModelError(model)
    if not sep:
        return Knobs()
    values = dict(_convert(name, text) for name, text in _split(spec).items())
    knobs = Knobs(**values)
    _check_combination(knobs)
    return knobs
