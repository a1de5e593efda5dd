"""Checking a chat-completion request before it becomes a job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chatq.chat import tokens
from chatq.chat.objects import ChatCompletionRequest
from chatq.chat.tokens import Policy
from chatq.chat.typed_input import convert
from chatq.config import Settings
from chatq.errors import ApiError

# The fields that multiply the operator's bill, each with the setting that caps it.
CAPPED = {
    "n": "max_n",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
}


def _invalid(message: str, param: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, code, message, param=param)


def _check_fields(body: dict[str, Any]) -> None:
    """The request against ChatCompletionRequest (chatq/chat/typed_input.py), and what no
    struct can say: a message without `content` has `tool_calls`."""
    if "messages" in body and body["messages"] is None:  # null: absent elsewhere, not here
        raise _invalid("`messages` must be a non-empty array of messages.", "messages")
    asked = convert(body, ChatCompletionRequest)
    for index, message in enumerate(asked.messages):
        if not message.tool_calls and "content" not in body["messages"][index]:
            param = f"messages[{index}].content"
            raise _invalid(f"`{param}` is required.", param, "missing_field")


def check_caps(body: dict[str, Any], settings: Settings, caps: dict[str, str] = CAPPED) -> None:
    """400 for a field of `body` over the setting that caps it (`caps`: field -> setting)."""
    for name, setting in caps.items():
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
    _check_fields(body)
    check_caps(body, settings)
    request = {**body, "model": body.get("model") or settings.default_model}
    return _capped_output(request, settings.max_output_tokens)
