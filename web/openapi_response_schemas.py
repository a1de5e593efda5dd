"""The OpenAPI schemas of the Responses API (text subset): the request, the Response, its
message and every streamed event, merged into the document of web/openapi.py."""

from __future__ import annotations

from chatq.config import Settings
from chatq.response_view import STATUSES
from chatq.responses import MAX_METADATA_KEYS, MIN_OUTPUT_TOKENS
from web.openapi_schemas import Schema, ref

_EVENTS = {
    "response.created": "ResponseLifecycleEvent",
    "response.queued": "ResponseLifecycleEvent",
    "response.in_progress": "ResponseLifecycleEvent",
    "response.completed": "ResponseLifecycleEvent",
    "response.incomplete": "ResponseLifecycleEvent",
    "response.failed": "ResponseLifecycleEvent",
    "response.output_item.added": "ResponseOutputItemEvent",
    "response.output_item.done": "ResponseOutputItemEvent",
    "response.content_part.added": "ResponseContentPartEvent",
    "response.content_part.done": "ResponseContentPartEvent",
    "response.output_text.delta": "ResponseTextDeltaEvent",
    "response.output_text.done": "ResponseTextDoneEvent",
    "error": "ResponseErrorEvent",
}


def _obj(required: list[str] | None = None, /, **properties: Schema) -> Schema:
    """A closed object; every property required unless `required` says otherwise."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "required": list(properties) if required is None else required,
    }


def _const(value: str) -> Schema:
    return {"type": "string", "const": value}


def _nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _format(kind: str, **properties: Schema) -> Schema:
    required = ["type", *(name for name in properties if name in ("name", "schema"))]
    return {
        "type": "object",
        "required": required,
        "properties": {"type": {"const": kind}, **properties},
    }


# `text`: only its `format` is honoured (plain text, or JSON by the chat `response_format`).
_TEXT: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "format": _nullable(
            {
                "anyOf": [
                    _format("text"),
                    _format("json_object"),
                    _format(
                        "json_schema",
                        name={"type": "string"},
                        schema={"type": "object"},
                        description={"type": "string"},
                        strict={"type": ["boolean", "null"]},
                    ),
                ]
            }
        ),
        "verbosity": {"type": "null"},
    },
}


def _input_item() -> Schema:
    part = _obj(
        type={"type": "string", "enum": ["input_text", "output_text"]}, text={"type": "string"}
    )
    part["additionalProperties"] = True  # `annotations` of an output_text part passed back
    content = {"oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": part}]}
    item = _obj(
        ["role", "content"],
        type=_const("message"),
        role={"type": "string", "enum": ["user", "assistant", "system", "developer"]},
        content=content,
    )
    item["additionalProperties"] = True  # `id`, `status` of an output item passed back
    return item


def _request(settings: Settings) -> Schema:
    cap = settings.max_output_tokens
    tokens: Schema = {"type": "integer", "minimum": MIN_OUTPUT_TOKENS}
    if cap > 0:
        tokens["maximum"] = cap
    number = {"type": "number", "minimum": 0}
    return _obj(
        ["input"],
        model={"type": "string", "minLength": 1, "description": "Default CHATQ_DEFAULT_MODEL."},
        input={
            "oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": _input_item()}]
        },
        instructions=_nullable({"type": "string"}),
        max_output_tokens=_nullable(tokens),
        temperature=_nullable({**number, "maximum": 2}),
        top_p=_nullable({**number, "maximum": 1}),
        metadata=_nullable(
            {
                "type": "object",
                "maxProperties": MAX_METADATA_KEYS,
                "additionalProperties": {"type": "string", "maxLength": 512},
            }
        ),
        store=_nullable({"type": "boolean", "default": True}),
        stream=_nullable({"type": "boolean", "default": False}),
        background=_nullable({"type": "boolean", "default": False}),
        previous_response_id=_nullable({"type": "string"}),
        truncation=_nullable({"type": "string", "enum": ["auto", "disabled"]}),
        text=_nullable(_TEXT),
        user={"type": "string"},
        safety_identifier={"type": "string"},
        prompt_cache_key={"type": "string"},
        service_tier=_nullable({"type": "string"}),
        tools={"type": "array", "maxItems": 0},
        include={"type": "array", "maxItems": 0},
        tool_choice={"type": "string", "enum": ["auto", "none"]},
        parallel_tool_calls={"type": "boolean"},
    )


def _message() -> Schema:
    text_part = _obj(
        type=_const("output_text"),
        text={"type": "string"},
        annotations={"type": "array", "maxItems": 0},
        logprobs={"type": "array", "maxItems": 0},
    )
    refusal = _obj(type=_const("refusal"), refusal={"type": "string"})
    return _obj(
        id={"type": "string"},
        type=_const("message"),
        status={"type": "string", "enum": ["in_progress", "completed", "incomplete"]},
        role=_const("assistant"),
        content={"type": "array", "items": {"oneOf": [text_part, refusal]}},
    )


def _response() -> Schema:
    message = _message()
    details = _obj(reason={"type": "string", "enum": ["max_output_tokens", "content_filter"]})
    usage = _obj(
        input_tokens={"type": "integer"},
        input_tokens_details=_obj(cached_tokens={"type": "integer"}),
        output_tokens={"type": "integer"},
        output_tokens_details=_obj(reasoning_tokens={"type": "integer"}),
        total_tokens={"type": "integer"},
    )
    fields: dict[str, Schema] = {
        "id": {"type": "string", "pattern": "^resp_"},
        "object": _const("response"),
        "created_at": {"type": "integer"},
        "status": {"type": "string", "enum": list(STATUSES)},
        "background": {"type": "boolean"},
        "completed_at": _nullable({"type": "integer"}),
        "error": _nullable(_obj(code={"type": "string"}, message={"type": "string"})),
        "incomplete_details": _nullable(details),
        "instructions": _nullable({"type": "string"}),
        "max_output_tokens": _nullable({"type": "integer"}),
        "model": {"type": "string"},
        "output": {"type": "array", "items": message},
        "parallel_tool_calls": {"type": "boolean"},
        "previous_response_id": _nullable({"type": "string"}),
        "reasoning": {"type": "null"},
        "temperature": _nullable({"type": "number"}),
        "text": {"type": "object"},
        "tool_choice": _const("auto"),
        "tools": {"type": "array", "maxItems": 0},
        "top_p": _nullable({"type": "number"}),
        "truncation": {"type": "string", "enum": ["auto", "disabled"]},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
        "output_text": {"type": "string", "description": "The output's text, concatenated."},
        "usage": usage,
    }
    schema = _obj([k for k in fields if k not in ("output_text", "usage")], **fields)
    schema["description"] = (
        "OpenAI's Response object, for the text subset chatq serves: "
        "`usage` once the upstream gave it."
    )
    return {"Response": schema, "ResponseMessage": message}


def _events() -> dict[str, Schema]:
    seq, integer, string = (
        {"type": "integer", "minimum": 0},
        {"type": "integer"},
        {"type": "string"},
    )

    def kinds(schema: str) -> Schema:
        return {"type": "string", "enum": [k for k, s in _EVENTS.items() if s == schema]}

    where = {"item_id": string, "output_index": integer, "content_index": integer}
    events = {
        "ResponseLifecycleEvent": _obj(
            type=kinds("ResponseLifecycleEvent"), response=ref("Response"), sequence_number=seq
        ),
        "ResponseOutputItemEvent": _obj(
            type=kinds("ResponseOutputItemEvent"),
            output_index=integer,
            item=ref("ResponseMessage"),
            sequence_number=seq,
        ),
        "ResponseContentPartEvent": _obj(
            type=kinds("ResponseContentPartEvent"),
            **where,
            part={"type": "object"},
            sequence_number=seq,
        ),
        "ResponseTextDeltaEvent": _obj(
            type=_const("response.output_text.delta"),
            **where,
            delta=string,
            logprobs={"type": "array"},
            sequence_number=seq,
        ),
        "ResponseTextDoneEvent": _obj(
            type=_const("response.output_text.done"),
            **where,
            text=string,
            logprobs={"type": "array"},
            sequence_number=seq,
        ),
        "ResponseErrorEvent": _obj(
            type=_const("error"),
            code=_nullable(string),
            message=string,
            param=_nullable(string),
            sequence_number=seq,
        ),
    }
    union = {
        "oneOf": [ref(name) for name in events],
        "description": "Numbered from 0; a replay gives the same numbers.",
    }
    return {**events, "ResponseStreamEvent": union}


def response_schemas(settings: Settings | None = None) -> dict[str, Schema]:
    """The component schemas of the Responses API."""
    deleted = _obj(
        id={"type": "string"},
        object=_const("response.deleted"),
        deleted={"type": "boolean", "const": True},
    )
    return {
        "ResponseRequest": _request(settings or Settings()),
        **_response(),
        **_events(),
        "ResponseDeleted": deleted,
    }
