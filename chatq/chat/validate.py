"""Checking a chat-completion request before it becomes a job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from chatq.chat import tokens
from chatq.chat.objects import ROLES, WHOLE_FIELDS, ChatCompletionRequest
from chatq.chat.tokens import Policy
from chatq.config.settings import Settings
from chatq.errors import ApiError

# The fields that multiply the operator's bill, each with the setting that caps it.
CAPPED = {
    "n": "max_n",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
}


def _invalid(message: str, param: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, code, message, param=param)


def _check_message(index: int, message: Any) -> None:
    """One message, with chatq's own words: a ChatMessage but for the unknown fields."""
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
    whole: dict[str, Any] = {name: _whole(body[name]) for name in WHOLE_FIELDS if name in body}
    bias = body.get("logit_bias")
    if isinstance(bias, dict):
        whole["logit_bias"] = {token: _whole(value) for token, value in bias.items()}
    return {**body, **whole}


def _check_fields(body: dict[str, Any]) -> None:
    """The typed fields against ChatCompletionRequest (null is as absent; bools are no
    numbers); the error names the top-level field, as OpenAI's `param` does."""
    sent = {name: value for name, value in body.items() if value is not None}
    try:
        msgspec.convert(sent, ChatCompletionRequest, strict=True)
    except msgspec.ValidationError as error:
        reason, _, path = str(error).partition(" - at `$.")
        param = path.rstrip("`").split("[")[0].split(".")[0]
        what = reason.replace("Expected ", "must be ", 1)  # e.g. "must be `int` <= 128"
        raise _invalid(f"`{param}` {what}.", param) from None


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
    _check_fields(body)
    _check_caps(body, settings)
    request = {**body, "model": body.get("model") or settings.default_model}
    return _capped_output(request, settings.max_output_tokens)
