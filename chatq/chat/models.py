"""Known OpenAI models: their tokenizer and context window, matched by name prefix."""

from __future__ import annotations

from typing import NamedTuple


class ModelInfo(NamedTuple):
    """A model family's BPE encoding and its context window in tokens (prompt + answer)."""

    encoding: str
    context_tokens: int


_O200K = "o200k_base"
_CL100K = "cl100k_base"

# Keys are matched against the model name as a whole or as a prefix followed by "-", longest
# first, so `gpt-4o-2024-08-06` is gpt-4o and `gpt-4-0613` is gpt-4, but `gpt-4o` is never
# gpt-4 and an unlisted `gpt-4z` is unknown rather than silently gpt-4.
MODELS: dict[str, ModelInfo] = {
    "gpt-5": ModelInfo(_O200K, 400_000),
    "gpt-5-chat": ModelInfo(_O200K, 128_000),
    "gpt-4.1": ModelInfo(_O200K, 1_047_576),
    "gpt-4.5": ModelInfo(_O200K, 128_000),
    "gpt-4o": ModelInfo(_O200K, 128_000),
    "gpt-4o-mini": ModelInfo(_O200K, 128_000),
    "chatgpt-4o": ModelInfo(_O200K, 128_000),
    "o1": ModelInfo(_O200K, 200_000),
    "o1-mini": ModelInfo(_O200K, 128_000),
    "o1-preview": ModelInfo(_O200K, 128_000),
    "o3": ModelInfo(_O200K, 200_000),
    "o3-mini": ModelInfo(_O200K, 200_000),
    "o4-mini": ModelInfo(_O200K, 200_000),
    "gpt-oss": ModelInfo(_O200K, 131_072),
    "gpt-4": ModelInfo(_CL100K, 8_192),
    "gpt-4-32k": ModelInfo(_CL100K, 32_768),
    "gpt-4-turbo": ModelInfo(_CL100K, 128_000),
    "gpt-4-1106": ModelInfo(_CL100K, 128_000),
    "gpt-4-0125": ModelInfo(_CL100K, 128_000),
    "gpt-4-vision": ModelInfo(_CL100K, 128_000),
    "gpt-3.5-turbo": ModelInfo(_CL100K, 16_385),
    "gpt-3.5-turbo-16k": ModelInfo(_CL100K, 16_385),
    "gpt-3.5-turbo-0301": ModelInfo(_CL100K, 4_096),
    "gpt-3.5-turbo-0613": ModelInfo(_CL100K, 4_096),
    "gpt-3.5-turbo-instruct": ModelInfo(_CL100K, 4_096),
    # Azure OpenAI spells it without the dot.
    "gpt-35-turbo": ModelInfo(_CL100K, 16_385),
    "gpt-35-turbo-0301": ModelInfo(_CL100K, 4_096),
    "gpt-35-turbo-0613": ModelInfo(_CL100K, 4_096),
}

_BY_LENGTH = sorted(MODELS, key=len, reverse=True)


def base_model(model: str) -> str:
    """The plain model name: lower case, without `openai/` or a fine-tune's `ft:…:org::id`."""
    name = model.strip().lower().removeprefix("openai/")
    if name.startswith("ft:"):
        name = name[3:].split(":", 1)[0]
    return name


def model_info(model: str) -> ModelInfo | None:
    """The entry of the longest listed name `model` is, or starts with followed by "-"."""
    name = base_model(model)
    for key in _BY_LENGTH:
        if name == key or name.startswith(key + "-"):
            return MODELS[key]
    return None
