"""A Responses request's `input` as chat messages, and the 400s that name what is wrong in
a Responses request (chatq/responses/translation.py translates the rest of it)."""

from __future__ import annotations

from typing import Any

from chatq.errors import ApiError

JSONDict = dict[str, Any]

INPUT_ROLES = ("user", "assistant", "system", "developer")  # tuples: a dict is no member
TEXT_PARTS = ("input_text", "output_text")


def invalid(message: str, param: str, code: str = "invalid_request") -> ApiError:
    """A 400 naming `param`."""
    return ApiError(400, code, message, param=param)


def unsupported(param: str, why: str = "") -> ApiError:
    """A 400 for a parameter the text subset does not honour."""
    return invalid(
        f"`{param}` is not supported by chatq's Responses API (text only){why}.",
        param,
        "unsupported_parameter",
    )


def _text_of(part: Any, param: str) -> str:
    if not isinstance(part, dict):
        raise invalid(f"`{param}` must be a content part object.", param)
    kind = part.get("type")
    if kind not in TEXT_PARTS:
        raise unsupported(param, f": a `{str(kind)[:40]}` part; only text parts are")
    text = part.get("text")
    if not isinstance(text, str):
        raise invalid(f"`{param}.text` must be a string.", f"{param}.text")
    return text


def _content(content: Any, param: str) -> str | list[JSONDict]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise invalid(f"`{param}` must be a string or a non-empty list of text parts.", param)
    texts = [_text_of(part, f"{param}[{j}]") for j, part in enumerate(content)]
    return texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]


def _message(item: Any, param: str) -> JSONDict:
    if not isinstance(item, dict):
        raise invalid(f"`{param}` must be a message object.", param)
    kind = item.get("type", "message")
    if kind != "message":
        raise unsupported(param, f": a `{str(kind)[:40]}` item; only message items are")
    role = item.get("role")
    if role not in INPUT_ROLES:
        raise invalid(f"`{param}.role` must be one of {', '.join(INPUT_ROLES)}.", f"{param}.role")
    if "content" not in item:
        raise invalid(f"`{param}.content` is required.", f"{param}.content", "missing_field")
    return {"role": role, "content": _content(item["content"], f"{param}.content")}


def input_messages(value: Any) -> list[JSONDict]:
    """`input` (a string, or a list of message items with text content) as chat messages."""
    if value is None:
        raise invalid("`input` is required.", "input", "missing_field")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise invalid("`input` must be a string or a non-empty list of message items.", "input")
    return [_message(item, f"input[{i}]") for i, item in enumerate(value)]
