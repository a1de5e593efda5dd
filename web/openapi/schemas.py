"""The component schemas of the OpenAPI document: the JSON objects of the API (docs/api.md)."""

from __future__ import annotations

from typing import Any, get_args

import msgspec

from chatq import batches, chat, errors, jobs, metrics, responses, webhooks
from chatq.chat import CAPPED as chat_caps
from chatq.config import Settings
from chatq.responses import CAPPED as response_caps

Schema = dict[str, Any]
REF = "#/components/schemas/{name}"


def ref(name: str) -> Schema:
    """A reference to the component schema `name`."""
    return {"$ref": REF.format(name=name)}


# Literal enums msgspec writes sorted, put back in the order they are declared in.
_ORDERED = [
    jobs.STATUSES,
    jobs.PRIORITIES,
    get_args(chat.Role),
    batches.STATUSES,
    responses.STATUSES,
    webhooks.ATTEMPT_OUTCOMES,
    get_args(webhooks.EventType),
    get_args(jobs.TerminalStatus),
]


def _ordered(values: list[Any]) -> list[Any]:
    for order in _ORDERED:
        if set(values) == set(order):
            return list(order)
    return values


def _tidy(node: Any) -> Any:
    """msgspec's schema, as this document writes it: no titles, one-line descriptions,
    `["number", "null"]` for a union of bare types, string enums typed (one value: const)."""
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _tidy(value) for key, value in node.items() if key != "title"}
    if isinstance(node.get("description"), str):
        node["description"] = " ".join(node["description"].split())
    members = node.get("anyOf", [])
    if members and all(list(m) == ["type"] and isinstance(m["type"], str) for m in members):
        node["type"] = [m["type"] for m in node.pop("anyOf")]
    values = node.get("enum")
    if values and all(isinstance(v, str) for v in values):
        node["type"] = "string"
        if len(values) == 1:
            node["const"] = node.pop("enum")[0]
        else:
            node["enum"] = _ordered(values)
    return node


def components(*types: Any) -> tuple[list[Schema], dict[str, Schema]]:
    """The schemas of `types` (structs, or unions of them), and every struct they hold as a
    component named by its class."""
    roots, found = msgspec.json.schema_components(types, ref_template=REF)
    return _tidy(roots), {name: _tidy(schema) for name, schema in found.items()}


# The requests' fields capped by a setting, by the code that checks them.
_CAPS = (("ChatCompletionRequest", chat_caps), ("ResponseRequest", response_caps))


def _capped(found: dict[str, Schema], settings: Settings) -> None:
    """The requests' schemas with this server's caps."""
    for struct, caps in _CAPS:
        for name, setting in caps.items():
            cap, field = getattr(settings, setting), found[struct]["properties"][name]
            if cap > 0:
                number = next(m for m in field.get("anyOf", [field]) if m["type"] == "integer")
                number["maximum"] = min(number.get("maximum", cap), cap)
                field["description"] = f"At most {cap} here (CHATQ_{setting.upper()})."


# The objects the API takes and answers; every object they hold is a component too.
_ROOTS: tuple[type, ...] = (
    chat.ChatCompletionRequest,
    chat.ChatCompletionChunk,
    chat.ModelList,
    jobs.Job,
    jobs.EventsPage,
    errors.Error,
    metrics.Queue,
    metrics.QueueShare,
    metrics.Usage,
    metrics.Health,
    metrics.Readiness,
    responses.ResponseRequest,
    responses.ResponseDeleted,
    batches.FileUpload,
    batches.FileList,
    batches.FileDeleted,
    batches.BatchList,
    batches.BatchCreateRequest,
    webhooks.WebhookEndpointRequest,
    webhooks.RotateSecretRequest,
    webhooks.WebhookEndpointWithSecret,
    webhooks.WebhookEndpointList,
    webhooks.WebhookEndpointDeleted,
    webhooks.WebhookDeliveryList,
)


def schemas(settings: Settings | None = None) -> dict[str, Schema]:
    """Every component schema, by name; the caps are `settings`' (default: the defaults)."""
    event, found = components(jobs.JobEvent, *_ROOTS, *responses.STREAM_EVENTS)
    found["Event"] = event[0]
    _capped(found, settings or Settings())
    found["JobRequest"] = {
        "allOf": [ref("ChatCompletionRequest")],
        "properties": {"stream": {"const": False, "description": "`true` is a 400 here."}},
    }
    found["ResponseStreamEvent"] = {
        "oneOf": [ref(event.__name__) for event in responses.STREAM_EVENTS],
        "description": "Numbered from 0; a replay gives the same numbers.",
    }
    return found
