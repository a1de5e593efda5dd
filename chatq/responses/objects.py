"""The objects of OpenAI's Responses API (text subset) as chatq serves them, each declared
once: the request (chatq/responses/inputs.py checks it), the Response and its message
(chatq/responses/view.py builds them), every streamed event (chatq/responses/events.py) and a
deletion. The OpenAPI components are generated from these structs."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from msgspec import UNSET, Meta, Struct, UnsetType

from chatq.chat import MAX_TOKENS_LIMIT

JSONObject = dict[str, Any]
Empty = Annotated[list[Any], Meta(max_length=0)]
Truncation = Literal["auto", "disabled"]
ResponseStatus = Literal["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]
STATUSES: tuple[str, ...] = get_args(ResponseStatus)
# OpenAI's metadata: at most 16 pairs, keys up to 64 characters, string values up to 512.
MAX_METADATA_KEYS, MAX_METADATA_KEY_CHARS, MAX_METADATA_VALUE_CHARS = 16, 64, 512
MIN_OUTPUT_TOKENS = 16  # OpenAI's published minimum of max_output_tokens


class _Closed(Struct, forbid_unknown_fields=True):
    """A closed object: a field not declared is refused."""


class InputPart(Struct):
    """A text part of an input message; `annotations` of an output_text part passed back."""

    type: Literal["input_text", "output_text"]
    text: str


class InputMessage(Struct, kw_only=True):
    """A message of `input`; the `id` and `status` of an output item passed back pass."""

    role: Literal["user", "assistant", "system", "developer"]
    content: str | Annotated[list[InputPart], Meta(min_length=1)]
    type: Literal["message"] | UnsetType = UNSET


class FormatText(Struct, tag_field="type", tag="text"):
    """Plain text."""


class FormatJSONObject(Struct, tag_field="type", tag="json_object"):
    """Any JSON object, as the chat `response_format`."""


class FormatJSONSchema(Struct, tag_field="type", tag="json_schema", kw_only=True):
    """JSON by a schema, as the chat `response_format`."""

    name: str
    schema: JSONObject
    description: str | UnsetType = UNSET
    strict: bool | UnsetType | None = UNSET


class ResponseText(_Closed):
    """`text`: only its `format` is honoured."""

    format: FormatText | FormatJSONObject | FormatJSONSchema | UnsetType | None = UNSET
    verbosity: UnsetType | None = UNSET


Metadata = Annotated[
    dict[
        Annotated[str, Meta(max_length=MAX_METADATA_KEY_CHARS)],
        Annotated[str, Meta(max_length=MAX_METADATA_VALUE_CHARS)],
    ],
    Meta(max_length=MAX_METADATA_KEYS),
]
Flag = Annotated[bool, Meta(extra_json_schema={"default": False})]


class ResponseStreamOptions(_Closed):
    """`stream_options`: no obfuscation to ask for, as text only."""

    include_obfuscation: Literal[False] | UnsetType = UNSET


class ResponseRequest(_Closed, kw_only=True):
    """POST /v1/responses: what the text subset honours; anything else is a 400."""

    model: Annotated[str, Meta(min_length=1, description="Default CHATQ_DEFAULT_MODEL.")] | (
        UnsetType
    ) = UNSET
    input: str | Annotated[list[InputMessage], Meta(min_length=1)]
    instructions: str | UnsetType | None = UNSET
    max_output_tokens: (
        Annotated[int, Meta(ge=MIN_OUTPUT_TOKENS, le=MAX_TOKENS_LIMIT)] | (UnsetType) | None
    ) = UNSET
    temperature: Annotated[float, Meta(ge=0, le=2)] | UnsetType | None = UNSET
    top_p: Annotated[float, Meta(ge=0, le=1)] | UnsetType | None = UNSET
    metadata: Metadata | UnsetType | None = UNSET
    store: Annotated[bool, Meta(extra_json_schema={"default": True})] | UnsetType | None = UNSET
    stream: Flag | UnsetType | None = UNSET
    background: Flag | UnsetType | None = UNSET
    previous_response_id: str | UnsetType | None = UNSET
    truncation: Truncation | UnsetType | None = UNSET
    text: ResponseText | UnsetType | None = UNSET
    user: str | UnsetType = UNSET
    safety_identifier: str | UnsetType = UNSET
    prompt_cache_key: str | UnsetType = UNSET
    service_tier: str | UnsetType | None = UNSET
    # What the text subset lacks, taken only with the values that ask for none of it.
    tools: Empty | UnsetType = UNSET
    include: Empty | UnsetType = UNSET
    tool_choice: Literal["auto", "none"] | UnsetType = UNSET
    parallel_tool_calls: bool | UnsetType = UNSET
    reasoning: Annotated[JSONObject, Meta(max_length=0)] | UnsetType = UNSET
    stream_options: ResponseStreamOptions | UnsetType = UNSET


# The parameters of what the text subset lacks: a value they do not take is
# `400 unsupported_parameter`, not `invalid_request` (chatq/responses/inputs.py).
NOT_TEXT = (
    "tools",
    "include",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning",
    "stream_options",
    "text.verbosity",
)


class OutputText(_Closed, tag_field="type", tag="output_text"):
    """An `output_text` content part."""

    text: str
    annotations: Empty
    logprobs: Empty


class Refusal(_Closed, tag_field="type", tag="refusal"):
    """The model refused; its words."""

    refusal: str


class ResponseMessage(_Closed):
    """The assistant message of a Response's output."""

    id: str
    type: Literal["message"]
    status: Literal["in_progress", "completed", "incomplete"]
    role: Literal["assistant"]
    content: list[OutputText | Refusal]


class ResponseError(_Closed):
    """Why a response failed: OpenAI's code, the job's own code leading the message."""

    code: str
    message: str


class IncompleteDetails(_Closed):
    """Why a completed response was cut short."""

    reason: Literal["max_output_tokens", "content_filter"]


Count = Annotated[int, Meta(ge=0)]


class InputTokensDetails(_Closed):
    cached_tokens: Count


class OutputTokensDetails(_Closed):
    reasoning_tokens: Count


class ResponseUsage(_Closed):
    """The upstream's usage in the Responses API's names."""

    input_tokens: Count
    input_tokens_details: InputTokensDetails
    output_tokens: Count
    output_tokens_details: OutputTokensDetails
    total_tokens: Count


class Response(_Closed, kw_only=True):
    """OpenAI's Response object, for the text subset chatq serves: `usage` once the
    upstream gave it."""

    id: Annotated[str, Meta(pattern="^resp_")]
    object: Literal["response"]
    created_at: int
    status: ResponseStatus
    background: bool
    completed_at: int | None
    error: ResponseError | None
    incomplete_details: IncompleteDetails | None
    instructions: str | None
    max_output_tokens: int | None
    model: str
    output: list[ResponseMessage]
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: None
    temperature: float | None
    text: JSONObject
    tool_choice: Literal["auto"]
    tools: Empty
    top_p: float | None
    truncation: Truncation
    metadata: dict[str, str]
    output_text: Annotated[str, Meta(description="The output's text, concatenated.")] | (
        UnsetType
    ) = UNSET
    usage: ResponseUsage | UnsetType = UNSET


class ResponseDeleted(_Closed):
    """DELETE /v1/responses/{id}."""

    id: str
    object: Literal["response.deleted"]
    deleted: Annotated[bool, Meta(extra_json_schema={"const": True})]


Sequence = Annotated[int, Meta(ge=0)]
LifecycleKind = Literal[
    "response.created",
    "response.queued",
    "response.in_progress",
    "response.completed",
    "response.incomplete",
    "response.failed",
]


class ResponseLifecycleEvent(_Closed):
    type: LifecycleKind
    response: Response
    sequence_number: Sequence


class ResponseOutputItemEvent(_Closed):
    type: Literal["response.output_item.added", "response.output_item.done"]
    output_index: int
    item: ResponseMessage
    sequence_number: Sequence


class ResponseContentPartEvent(_Closed):
    type: Literal["response.content_part.added", "response.content_part.done"]
    item_id: str
    output_index: int
    content_index: int
    part: JSONObject
    sequence_number: Sequence


class ResponseTextDeltaEvent(_Closed):
    type: Literal["response.output_text.delta"]
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any]
    sequence_number: Sequence


class ResponseTextDoneEvent(_Closed):
    type: Literal["response.output_text.done"]
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Any]
    sequence_number: Sequence


class ResponseErrorEvent(_Closed):
    type: Literal["error"]
    code: str | None
    message: str
    param: str | None
    sequence_number: Sequence


# Numbered from 0; a replay gives the same numbers. Untagged (one struct has six `type`s):
# the OpenAPI document writes their union itself.
STREAM_EVENTS = (
    ResponseLifecycleEvent,
    ResponseOutputItemEvent,
    ResponseContentPartEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseErrorEvent,
)
