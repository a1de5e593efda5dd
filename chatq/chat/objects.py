"""The chat-completion objects of the API, each declared once: the request chatq checks and
the upstream's answers it passes through. Validation (chatq/chat/validate.py) and the OpenAPI
components (web/openapi/schemas.py) both read these structs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]

INT64 = 2**63
JSONObject = dict[str, Any]


class ChatMessage(Struct):
    """One message of a chat-completion request; unknown fields pass through."""

    role: Role
    content: Annotated[
        str | list[JSONObject] | None,
        Meta(description="Text, or a list of content parts; required unless `tool_calls`."),
    ] = None
    tool_calls: list[JSONObject] | None = None


# Content, or at least one tool call: a struct cannot say "one of two fields", JSON Schema can.
_CONTENT_OR_CALLS = Meta(
    extra_json_schema={
        "anyOf": [
            {"required": ["content"]},
            {
                "required": ["tool_calls"],
                "properties": {"tool_calls": {"type": "array", "minItems": 1}},
            },
        ]
    }
)

# The bounds OpenAI's published schema (CreateChatCompletionRequest) sets; the schema gives
# the token fields no bounds, but OpenAI's API refuses one below 1, and no model takes more
# than a 32-bit count (llama.cpp's and vLLM's limits are C ints; the longest context windows
# are some millions): a larger one is refused here, not sent upstream. UNSET: not sent.
MAX_TOKENS_LIMIT = 2**31 - 1
Penalty = Annotated[float, Meta(ge=-2, le=2)] | UnsetType
Tokens = Annotated[int, Meta(ge=1, le=MAX_TOKENS_LIMIT)] | UnsetType
AnyObject = JSONObject | UnsetType


class ChatCompletionRequest(Struct):
    """OpenAI's request, with the bounds of OpenAI's schema; fields not listed go to the
    upstream unchanged."""

    messages: Annotated[list[Annotated[ChatMessage, _CONTENT_OR_CALLS]], Meta(min_length=1)]
    model: Annotated[str, Meta(min_length=1, description="Default: CHATQ_DEFAULT_MODEL.")] | (
        UnsetType
    ) = UNSET
    stream: Annotated[bool, Meta(extra_json_schema={"default": False})] | UnsetType = UNSET
    temperature: Annotated[float, Meta(ge=0, le=2)] | UnsetType = UNSET
    top_p: Annotated[float, Meta(ge=0, le=1)] | UnsetType = UNSET
    presence_penalty: Penalty = UNSET
    frequency_penalty: Penalty = UNSET
    n: Annotated[int, Meta(ge=1, le=128)] | UnsetType = UNSET
    top_logprobs: Annotated[int, Meta(ge=0, le=20)] | UnsetType = UNSET
    seed: Annotated[int, Meta(ge=-INT64, le=INT64 - 1)] | UnsetType = UNSET
    max_tokens: Tokens = UNSET
    max_completion_tokens: Tokens = UNSET
    logprobs: bool | UnsetType = UNSET
    logit_bias: dict[str, Annotated[int, Meta(ge=-100, le=100)]] | UnsetType = UNSET
    stop: str | Annotated[list[str], Meta(min_length=1, max_length=4)] | UnsetType = UNSET
    response_format: AnyObject = UNSET
    stream_options: AnyObject = UNSET
    metadata: AnyObject = UNSET
    user: str | UnsetType = UNSET
    tools: list[JSONObject] | UnsetType = UNSET


class ChatCompletion(Struct):
    """The upstream's `chat.completion`, passed through unchanged: only its outline is fixed."""

    object: Literal["chat.completion"]
    choices: list[JSONObject]
    id: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    usage: AnyObject = UNSET


class ChatCompletionChunk(Struct):
    """One `chat.completion.chunk` of a streamed answer."""

    object: Literal["chat.completion.chunk"]
    choices: list[JSONObject]


class Model(Struct):
    """A model the upstream offers."""

    id: str
    object: Literal["model"]


class ModelList(Struct):
    """GET /v1/models: the upstream's list."""

    object: Literal["list"]
    data: list[Model]
