"""A Responses request checked against ResponseRequest, in the text subset's terms, and its
`input` as chat messages (chatq/responses/translation.py translates the rest of it)."""

from __future__ import annotations

import re
from typing import Any

from chatq.chat import Refused, convert
from chatq.errors import ApiError
from chatq.responses.objects import NOT_TEXT, InputMessage, InputPart, ResponseRequest

JSONDict = dict[str, Any]
# The `type` of an input item or of its content part: the kinds of input the subset lacks.
_INPUT_KIND = re.compile(r"(input\[\d+\](\.content\[\d+\])?)\.type\Z")


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


def _in_subset_terms(error: Refused) -> ApiError:
    """The error of a field the subset lacks, or of an input of a kind it lacks, said so."""
    if error.unknown:
        return unsupported(error.param or "")
    param = error.param or ""
    lacked = next((n for n in NOT_TEXT if param == n or param.startswith((f"{n}.", f"{n}["))), "")
    if lacked:
        return unsupported(lacked, f": `{param}` must be {error.expected}")
    kind = _INPUT_KIND.match(param)
    if kind:
        what = "part; only text parts are" if kind.group(2) else "item; only message items are"
        return unsupported(kind.group(1), f": a `{str(error.got)[:40]}` {what}")
    return error


def checked_request(body: JSONDict) -> ResponseRequest:
    """`body` as a ResponseRequest; else a 400 naming the parameter, `unsupported_parameter`
    for one (or a kind of input) that the text subset lacks."""
    try:
        return convert(body, ResponseRequest)
    except Refused as error:
        raise _in_subset_terms(error) from None


def _content(content: str | list[InputPart]) -> str | list[JSONDict]:
    if isinstance(content, str):
        return content
    texts = [part.text for part in content]
    return texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]


def input_messages(value: str | list[InputMessage]) -> list[JSONDict]:
    """`input` (a string, or message items with text content) as chat messages."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return [{"role": item.role, "content": _content(item.content)} for item in value]
