"""Validators of the schemas of chatq's own OpenAPI document; OpenAI's: tests/openai_schemas.py."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

URI = "urn:chatq:openapi"


def validator(name: str, doc: dict[str, Any] | None = None) -> Draft202012Validator:
    """A validator of component schema `name` of `doc` (default: the document chatq serves)."""
    if doc is None:
        from web.openapi.document import document

        doc = document()
    registry: Registry[Any] = Registry().with_resource(
        URI, Resource.from_contents(doc, default_specification=DRAFT202012)
    )
    return Draft202012Validator({"$ref": f"{URI}#/components/schemas/{name}"}, registry=registry)


def check(name: str, value: Any) -> None:
    """`value` is what the served document's schema `name` says (else ValidationError)."""
    validator(name).validate(value)
