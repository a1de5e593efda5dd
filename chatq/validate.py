"""Checking a chat-completion request before it becomes a job."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from chatq import tokens
from chatq.config import Settings
from chatq.errors import ApiError
from chatq.tokens import Policy

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

# Fields whose type we check; everything else passes to the upstream as sent.
_NUMBER = (int, float)
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "temperature": _NUMBER,
    "top_p": _NUMBER,
    "presence_penalty": _NUMBER,
    "frequency_penalty": _NUMBER,
    "max_tokens": (int,),
    "max_completion_tokens": (int,),
    "n": (int,),
    "seed": (int,),
    "logprobs": (bool,),
    "top_logprobs": (int,),
    "logit_bias": (dict,),
    "stop": (str, list),
    "tools": (list,),
    "response_format": (dict,),
    "stream": (bool,),
    "stream_options": (dict,),
    "user": (str,),
    "metadata": (dict,),
}


def _invalid(message: str, param: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, code, message, param=param)


def _check_message(index: int, message: Any) -> None:
    param = f"messages[{index}]"
    if not isinstance(message, dict):
        raise _invalid(f"{param} must be an object with `role` and `content`.", param)
    role = message.get("role")
    if role is None:
        raise _invalid(f"{param}.role is required.", f"{param}.role", "missing_field")
    if not isinstance(role, str) or role not in ROLES:
        raise _invalid(f"{param}.role must be one of {sorted(ROLES)}.", f"{param}.role")
    content = message.get("content")
    calls = message.get("tool_calls")
    if calls is not None and not (
        isinstance(calls, list) and all(isinstance(c, dict) for c in calls)
    ):
        raise _invalid(f"{param}.tool_calls must be a list of objects.", f"{param}.tool_calls")
    if "content" not in message and not calls:
        raise _invalid(f"{param}.content is required.", f"{param}.content", "missing_field")
    parts_ok = isinstance(content, list) and all(isinstance(p, dict) for p in content)
    if content is not None and not (isinstance(content, str) or parts_ok):
        raise _invalid(f"{param}.content must be a string or a list of parts.", f"{param}.content")


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _whole_numbers(body: dict[str, Any]) -> dict[str, Any]:
    """`1.0` where a whole number is wanted is `1`: JSON Schema counts it an integer too."""
    whole: dict[str, Any] = {
        name: _whole(value) for name, value in body.items() if FIELD_TYPES.get(name) == (int,)
    }
    bias = body.get("logit_bias")
    if isinstance(bias, dict):
        whole["logit_bias"] = {token: _whole(value) for token, value in bias.items()}
    return {**body, **whole}


# The type of each item of the list fields.
ITEM_TYPES: dict[str, type] = {"stop": str, "tools": dict}


def _check_types(body: dict[str, Any]) -> None:
    for name, types in FIELD_TYPES.items():
        value = body.get(name)
        if value is None:
            continue
        wrong_bool = isinstance(value, bool) and bool not in types
        if wrong_bool or not isinstance(value, types):
            kinds = " or ".join(t.__name__ for t in types)
            raise _invalid(f"`{name}` must be of type {kinds}.", name)
        item_type = ITEM_TYPES.get(name)
        if (
            isinstance(value, list)
            and item_type
            and not all(isinstance(item, item_type) for item in value)
        ):
            raise _invalid(f"`{name}` must be a list of {item_type.__name__}.", name)


# The bounds OpenAI's published schema (CreateChatCompletionRequest) sets; the schema gives
# the token fields no minimum, but OpenAI's API refuses one below 1.
INT64 = 2**63
RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0, 2),
    "top_p": (0, 1),
    "presence_penalty": (-2, 2),
    "frequency_penalty": (-2, 2),
    "n": (1, 128),
    "top_logprobs": (0, 20),
    "seed": (-INT64, INT64 - 1),
    "max_tokens": (1, math.inf),
    "max_completion_tokens": (1, math.inf),
}
LOGIT_BIAS_RANGE = (-100, 100)
MAX_STOP_SEQUENCES = 4
# The fields that multiply the operator's bill, each with the setting that caps it.
CAPPED = {
    "n": "max_n",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
}


def _bounds_text(low: float, high: float) -> str:
    return f"at least {low:g}" if math.isinf(high) else f"between {low:g} and {high:g}"


def _check_ranges(body: dict[str, Any]) -> None:
    for name, (low, high) in RANGES.items():
        value = body.get(name)
        if value is not None and not low <= value <= high:
            bounds = _bounds_text(low, high)
            raise _invalid(f"`{name}` must be {bounds}, got {str(value)[:30]}.", name)
    bias = body.get("logit_bias") or {}
    for token, value in bias.items():
        wrong_type = isinstance(value, bool) or not isinstance(value, int)
        if wrong_type or not LOGIT_BIAS_RANGE[0] <= value <= LOGIT_BIAS_RANGE[1]:
            raise _invalid(
                f"`logit_bias` values must be whole numbers between -100 and 100; "
                f"token {token[:20]!r} has {str(value)[:20]}.",
                "logit_bias",
            )
    stop = body.get("stop")
    if isinstance(stop, list) and not 1 <= len(stop) <= MAX_STOP_SEQUENCES:
        raise _invalid(f"`stop` must list 1 to {MAX_STOP_SEQUENCES} sequences.", "stop")


def _check_caps(body: dict[str, Any], settings: Settings) -> None:
    for name, setting in CAPPED.items():
        cap, value = getattr(settings, setting), body.get(name)
        if cap > 0 and value is not None and value > cap:
            raise _invalid(f"`{name}` is {value}, over the {cap} this server allows.", name)


def _capped_output(request: dict[str, Any], cap: int) -> dict[str, Any]:
    """The request with `max_tokens` set to the cap when it states no output limit."""
    if cap <= 0 or any(request.get(f) is not None for f in ("max_tokens", "max_completion_tokens")):
        return request
    return {**request, "max_tokens": cap}


@dataclass(frozen=True)
class Fitted:
    """A request that fits its model's context, and its prompt tokens (counted once, for
    the context and the key's token limits alike)."""

    request: dict[str, Any]
    prompt_tokens: int


def fit_context(request: dict[str, Any], max_context_tokens: int, policy: Policy) -> Fitted:
    """The request if its prompt fits the model's context, trimmed if allowed, and its prompt
    tokens; else 422."""
    fitted, prompt_tokens = tokens.fit(request, max_context_tokens, policy)
    return Fitted(fitted, prompt_tokens)


def within_context(
    request: dict[str, Any], max_context_tokens: int, policy: Policy
) -> dict[str, Any]:
    """The request if its prompt fits the model's context, trimmed if allowed; else 422."""
    return fit_context(request, max_context_tokens, policy).request


def chat_request(body: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The request to send upstream, defaults filled in; raises 400 if bad or over a cap."""
    if "messages" not in body:
        raise _invalid("`messages` is required.", "messages", "missing_field")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise _invalid("`messages` must be a non-empty list.", "messages")
    for index, message in enumerate(messages):
        _check_message(index, message)
    body = _whole_numbers(body)
    _check_types(body)
    _check_ranges(body)
    _check_caps(body, settings)
    if body.get("model") == "":
        raise _invalid("`model` must not be empty.", "model")
    request = {**body, "model": body.get("model") or settings.default_model}
    return _capped_output(request, settings.max_output_tokens)
