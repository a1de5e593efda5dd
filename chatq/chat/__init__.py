"""The chat request: validation, token counts, the models' context windows."""

from chatq.chat.json_input import NestedTooDeeply, parse
from chatq.chat.objects import (
    MAX_TOKENS_LIMIT,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ModelList,
    Role,
)
from chatq.chat.token_encodings import preload
from chatq.chat.tokens import (
    OVERFLOW_POLICIES,
    Policy,
    charged_tokens,
    count_prompt_tokens,
    count_text,
)
from chatq.chat.typed_input import Refused, convert
from chatq.chat.validate import CAPPED, chat_request, check_caps, fit_context

__all__ = [
    "CAPPED",
    "MAX_TOKENS_LIMIT",
    "OVERFLOW_POLICIES",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionRequest",
    "ModelList",
    "NestedTooDeeply",
    "Policy",
    "Refused",
    "Role",
    "charged_tokens",
    "chat_request",
    "check_caps",
    "convert",
    "count_prompt_tokens",
    "count_text",
    "fit_context",
    "parse",
    "preload",
]
