"""Checking a chat-completion request before it becomes a job."""

from __future__ import annotations

from typing import Any

from chatq import tokens
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
        if isinstance(value, list) and item_type and not all(
            isinstance(item, item_type) for item in value
        ):
            raise _invalid(f"`{name}` must be a list of {item_type.__name__}.", name)


def within_context(
    request: dict[str, Any], max_context_tokens: int, policy: Policy
) -> dict[str, Any]:
    """The request if its prompt fits the model's context, trimmed if allowed; else 422."""
    fitted, _ = tokens.fit(request, max_context_tokens, policy)
    return fitted


def chat_request(body: dict[str, Any], default_model: str) -> dict[str, Any]:
    """The request to send upstream, with the default model filled in; raises 400 if bad."""
    if "messages" not in body:
        raise _invalid("`messages` is required.", "messages", "missing_field")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise _invalid("`messages` must be a non-empty list.", "messages")
    for index, message in enumerate(messages):
        _check_message(index, message)
    _check_types(body)
    if body.get("model") == "":
        raise _invalid("`model` must not be empty.", "model")
    return {**body, "model": body.get("model") or default_model}
