"""The OpenAPI schemas of the Responses API (text subset), from chatq/response_objects.py."""

from __future__ import annotations

from chatq.config import Settings
from chatq.response_objects import STREAM_EVENTS, ResponseDeleted, ResponseRequest
from web.openapi_schemas import Schema, components, ref


def response_schemas(settings: Settings | None = None) -> dict[str, Schema]:
    """The component schemas of the Responses API; the output cap is `settings`'."""
    found = components(ResponseRequest, ResponseDeleted, *STREAM_EVENTS)
    cap = (settings or Settings()).max_output_tokens
    if cap > 0:
        tokens = found["ResponseRequest"]["properties"]["max_output_tokens"]["anyOf"][0]
        tokens["maximum"] = cap
    found["ResponseStreamEvent"] = {
        "oneOf": [ref(event.__name__) for event in STREAM_EVENTS],
        "description": "Numbered from 0; a replay gives the same numbers.",
    }
    return found
