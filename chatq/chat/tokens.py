"""Prompt tokens of a chat request, counted offline, and the model's context limit enforced."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Literal

import tiktoken

from chatq import runtime
from chatq.chat.models import model_info
from chatq.chat.token_encodings import encoding_for, is_built
from chatq.errors import ApiError
from chatq.runtime import Tally

Policy = Literal["reject", "truncate_oldest"]
OVERFLOW_POLICIES: tuple[Policy, ...] = ("reject", "truncate_oldest")

# OpenAI cookbook, "How to count tokens with tiktoken": each message is framed by 3 tokens, a
# `name` costs 1 more, and every reply is primed with 3 (<|start|>assistant<|message|>).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
# An image part counts as OpenAI's floor for one image (detail "low"); its real cost depends
# on pixels we do not fetch, so this never rejects a prompt for its images. Audio and file
# parts count nothing.
IMAGE_TOKENS = 85
IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
# A prompt with less text than this is counted where it is asked for; a larger one off the event
# loop (chatq/runtime/offload.py). Measured on 2 cores: the hop to a thread and back costs about 60
# us of CPU, counting costs 40 us per 1,000 characters of prose (up to 0.3 us a character for text
# made to be slow), so a count inline holds the loop at most about 1 ms.
INLINE_MAX_CHARS = 4096


def _text(enc: tiktoken.Encoding, text: str) -> int:
    # Special-token strings in user text are plain text to the API, so encode them as such.
    return len(enc.encode_ordinary(text))


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _part_tokens(enc: tiktoken.Encoding, part: object) -> int:
    if not isinstance(part, dict):
        return _text(enc, part) if isinstance(part, str) else 0
    kind = part.get("type")
    if kind in IMAGE_PART_TYPES:
        return IMAGE_TOKENS
    # {"type": "text", "text": …} and {"type": "refusal", "refusal": …}
    text = part.get(kind) if isinstance(kind, str) else None
    return _text(enc, text) if isinstance(text, str) else 0


def _content_tokens(enc: tiktoken.Encoding, content: object) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return _text(enc, content)
    if isinstance(content, list):
        return sum(_part_tokens(enc, part) for part in content)
    return _text(enc, _json(content))


def message_tokens(enc: tiktoken.Encoding, message: object) -> int:
    """One message by the cookbook rule; tool_calls and other structured fields as JSON."""
    if not isinstance(message, dict):
        return TOKENS_PER_MESSAGE + _text(enc, _json(message))
    tokens = TOKENS_PER_MESSAGE
    for key, value in message.items():
        if key == "content":
            tokens += _content_tokens(enc, value)
        elif isinstance(value, str):
            tokens += _text(enc, value)
        elif value is not None:
            tokens += _text(enc, _json(value))
        if key == "name":
            tokens += TOKENS_PER_NAME
    return tokens


def _fixed_tokens(enc: tiktoken.Encoding, request: dict[str, Any]) -> int:
    # Tool definitions are rendered by OpenAI in its own format; their JSON is close, a bit over.
    tokens = REPLY_PRIMING_TOKENS
    for key in ("tools", "functions"):
        if request.get(key):
            tokens += _text(enc, _json(request[key]))
    return tokens


def _model(request: dict[str, Any]) -> str:
    model = request.get("model")
    return model if isinstance(model, str) else ""


def _messages(request: dict[str, Any]) -> list[Any]:
    messages = request.get("messages")
    return messages if isinstance(messages, list) else []


def _count_costs(request: dict[str, Any]) -> tuple[int, list[int]]:
    enc, factor = encoding_for(_model(request))
    fixed = math.ceil(_fixed_tokens(enc, request) * factor)
    return fixed, [math.ceil(message_tokens(enc, m) * factor) for m in _messages(request)]


def _shorter_than(value: object, limit: int) -> bool:
    """Whether `value` holds fewer than `limit` characters of text, every value and key
    counting at least one (so that the walk stops after `limit` of them, whatever it is)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            limit -= len(item) + 1
        elif isinstance(item, dict):
            limit -= 1
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            limit -= 1
            stack.extend(item)
        else:
            limit -= 1
        if limit <= 0:
            return False
    return True


_tally = Tally()


def prompts_counted() -> int:
    """How many prompts this process has counted (each count of a request's prompt is one)."""
    return _tally.count


def _costs(request: dict[str, Any]) -> tuple[int, list[int]]:
    """The request's fixed tokens and each message's tokens, estimates already scaled up;
    counted off the event loop unless the request is small and its encoding built."""
    _tally.add()
    if is_built(_model(request)) and _shorter_than(request, INLINE_MAX_CHARS):
        return _count_costs(request)
    return runtime.off_loop(_count_costs, request)


def _count_text(model: str, text: str) -> int:
    enc, factor = encoding_for(model)
    return math.ceil(_text(enc, text) * factor)


def count_text(model: str, text: str) -> int:
    """Tokens of `text` as `model`'s output, off the event loop unless it is short."""
    if is_built(model) and len(text) < INLINE_MAX_CHARS:
        return _count_text(model, text)
    return runtime.off_loop(_count_text, model, text)


def count_prompt_tokens(request: dict[str, Any]) -> int:
    """Prompt tokens of a chat-completion request: exact for OpenAI models, else estimated."""
    fixed, per_message = _costs(request)
    return fixed + sum(per_message)


def reserved_tokens(request: dict[str, Any]) -> tuple[str, int]:
    """The field that reserves room for the answer and how many tokens: ("", 0) if none."""
    for field in ("max_completion_tokens", "max_tokens"):
        value = request.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return field, value
    return "", 0


def charged_tokens(request: dict[str, Any], prompt_tokens: int, output_budget: int) -> int:
    """Tokens a request counts against a tokens-per-minute limit, as OpenAI counts them when
    it arrives: its prompt, and the output it may ask for (its max_tokens, else
    `output_budget`) times `n`."""
    output = reserved_tokens(request)[1] or output_budget
    n = request.get("n")
    choices = n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1
    return prompt_tokens + output * choices


def context_limit(model: str, override: int) -> int | None:
    """The tokens `model` may use: the smaller of its known window and `override` if > 0."""
    info = model_info(model)
    limits = [n for n in (info.context_tokens if info else 0, override) if n > 0]
    return min(limits) if limits else None


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, dict) else None


def _units(messages: Sequence[object], start: int) -> list[int]:
    """Where each droppable unit begins; tool results stay with the message before them."""
    return [
        i
        for i in range(start, len(messages))
        if i == start or _role(messages[i]) not in ("tool", "function")
    ]


def _head_length(messages: Sequence[object]) -> int:
    """How many system or developer messages open the conversation; they are always kept."""
    head = 0
    while head < len(messages) and _role(messages[head]) in ("system", "developer"):
        head += 1
    return head


def _keep_from(messages: Sequence[object], costs: Sequence[int], budget: int) -> int | None:
    """Where the newest messages that fit `budget` begin, if they reach the last user one."""
    head = _head_length(messages)
    budget -= sum(costs[:head])
    units = _units(messages, head)
    users = [i for i in units if _role(messages[i]) == "user"]
    must_keep = users[-1] if users else (units[-1] if units else None)
    keep, end = len(messages), len(messages)
    for begin in reversed(units):
        budget -= sum(costs[begin:end])
        if budget < 0:
            break
        keep, end = begin, begin
    return keep if must_keep is not None and keep <= must_keep else None


def _overflow(request: dict[str, Any], total: int, limit: int) -> str:
    """The sentence naming the counted tokens and the limit."""
    model = _model(request)
    field, reserved = reserved_tokens(request)
    info = model_info(model)
    about = "" if info else "about "
    reserve = f" (+ {reserved:,} reserved for {field})" if reserved else ""
    if info is None or limit < info.context_tokens:
        who = f"this server allows {limit:,} for {model or 'this model'}"
    else:
        who = f"{model} allows {limit:,}"
    return f"This request has {about}{total:,} prompt tokens{reserve} but {who}."


def fit(
    request: dict[str, Any], override: int, policy: Policy = "reject"
) -> tuple[dict[str, Any], int]:
    """The request (its oldest turns dropped if `policy` allows) and its prompt tokens."""
    fixed, costs = _costs(request)
    total = fixed + sum(costs)
    limit = context_limit(_model(request), override)
    reserved = reserved_tokens(request)[1]
    if limit is None or total + reserved <= limit:
        return request, total
    message = _overflow(request, total, limit)
    if policy == "truncate_oldest":
        messages = _messages(request)
        keep = _keep_from(messages, costs, limit - reserved - fixed)
        if keep is not None:
            head = _head_length(messages)
            kept = messages[:head] + messages[keep:]
            return {**request, "messages": kept}, total - sum(costs[head:keep])
        message += " Even its system message and newest user message do not fit."
    else:
        message += " Shorten the conversation, or send Chatq-Context-Overflow: truncate_oldest."
    raise ApiError(422, "context_length_exceeded", message, param="messages")
