"""OpenAI's published schemas (from ../shared/openai), as strict validators for tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMAS = (
    Path(__file__).resolve().parents[2] / "shared" / "openai" / "chat-completions-schemas.json"
)

Validate = Callable[[str, Any], None]


def _strict(node: Any) -> Any:
    # What we produce ourselves must not carry keys the schema does not know.
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    strict = {key: _strict(value) for key, value in node.items()}
    if "properties" in strict and "additionalProperties" not in strict:
        strict["additionalProperties"] = False
    return strict


@cache
def validator(name: str, strict: bool = True) -> Draft202012Validator:
    """A validator for one schema of components/schemas; strict forbids unknown keys."""
    components = json.loads(SCHEMAS.read_text())["components"]
    if strict:
        components = _strict(components)
    schema = {"$ref": f"#/components/schemas/{name}", "components": components}
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def check(name: str, instance: Any) -> None:
    """Validate strictly against OpenAI's schema `name`."""
    validator(name).validate(instance)
