"""The keys' limits in the OpenAPI document: GET /v1/usage and its object, OpenAI's
x-ratelimit-* headers on the submits, and their 429s (rate_limit_exceeded, insufficient_quota)."""

from __future__ import annotations

from web.openapi_parts import (
    error_responses,
    json_ref,
    operation,
    response_object,
)
from web.openapi_schemas import Schema, _const, _nullable, _object

_COUNT: Schema = {"type": "integer", "minimum": 0}
_LIMITED = (
    "`rate_limit_exceeded`: over the key's request rate (CHATQ_RATE_LIMIT), or over "
    "its requests or tokens per minute (CHATQ_KEY_*: `Retry-After`, `retry-after-ms` "
    "and `x-ratelimit-*` say when it will pass; a request larger than a minute's "
    "tokens never will: `x-should-retry: false`); `insufficient_quota`: over the key's "
    "daily or monthly token budget (`x-should-retry: false`, no `Retry-After`)."
)
# The submits the keys' limits charge, by path and method.
SUBMITS = (("/v1/jobs", "post"), ("/v1/chat/completions", "post"), ("/v1/responses", "post"))
_KINDS = {"requests": "requests per minute", "tokens": "tokens per minute"}


def headers() -> dict[str, Schema]:
    """The headers of the keys' limits, as OpenAI names them."""
    found: dict[str, Schema] = {}
    for kind, what in _KINDS.items():
        found[f"x-ratelimit-limit-{kind}"] = {
            "description": f"The key's {what} (only when it has such a limit).",
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        }
        found[f"x-ratelimit-remaining-{kind}"] = {
            "description": f"What is left of the key's {what} now.",
            "schema": {"type": "string", "pattern": "^[0-9]+$"},
        }
        found[f"x-ratelimit-reset-{kind}"] = {
            "description": f"How long until the key's {what} are whole again, as OpenAI "
            "writes it (`250ms`, `8.64s`, `6m0s`).",
            "schema": {"type": "string"},
        }
    found["retry-after-ms"] = {
        "description": "On a 429 of a minute's limit: milliseconds until this request would "
        "pass (the OpenAI SDKs read it before Retry-After).",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
    return found


def _bucket() -> Schema:
    limit = _nullable("integer", "The key's token budget of the period; null: none.")
    left = _nullable("integer", "What is left of the budget; null: no budget.")
    bucket = _object(
        [
            "object",
            "start_time",
            "end_time",
            "num_model_requests",
            "tokens",
            "limit_tokens",
            "remaining_tokens",
        ],
        object=_const("bucket"),
        start_time=_COUNT,
        end_time=_COUNT,
        num_model_requests=_COUNT,
        tokens={**_COUNT, "description": "Used by ended jobs and held by the others."},
        limit_tokens=limit,
        remaining_tokens=left,
    )
    bucket["description"] = "One UTC day or month: unix seconds it starts and ends at."
    return bucket


def schemas() -> dict[str, Schema]:
    """The Usage object of GET /v1/usage."""
    minute: dict[str, Schema] = {}
    for kind, what in _KINDS.items():
        minute[f"limit_{kind}"] = _nullable("integer", f"The key's {what}; null: none.")
        minute[f"remaining_{kind}"] = _nullable("integer", "What is left now.")
        minute[f"reset_{kind}"] = _nullable("string", "How long until it is whole again.")
    usage = _object(
        ["object", "key", "rate_limits", "day", "month", "reserved_tokens"],
        object=_const("usage"),
        key={"type": "string", "description": "The key's name."},
        rate_limits=_object(sorted(minute), True, **minute),
        day=_bucket(),
        month=_bucket(),
        reserved_tokens={
            **_COUNT,
            "description": "Tokens held by the key's jobs that have "
            "not ended (each job's end replaces them "
            "by what it used).",
        },
    )
    return {"Usage": usage}


def paths() -> dict[str, Schema]:
    """GET /v1/usage."""
    usage = operation(
        "getUsage",
        "The calling key's limits and use",
        {
            "200": response_object(
                "Its limits and what it used this minute, today and this month (UTC).",
                json_ref("Usage"),
            ),
            **error_responses(401, 429, 503),
        },
    )
    return {"/v1/usage": {"get": usage}}


def add_headers(all_paths: dict[str, Schema]) -> dict[str, Schema]:
    """The x-ratelimit-* headers on the answers of the submits, and their 429s."""
    for path, method in SUBMITS:
        op = all_paths.get(path, {}).get(method)
        if op is None:
            continue
        for status, response in op["responses"].items():
            names = (
                list(headers())
                if status == "429"
                else [h for h in headers() if h.startswith("x-ratelimit")]
            )
            if status == "429":
                response["description"] = _LIMITED
                names.append("x-should-retry")
            if int(status) < 300 or status == "429":
                response.setdefault("headers", {}).update(
                    {h: {"$ref": f"#/components/headers/{h}"} for h in names}
                )
    return all_paths
