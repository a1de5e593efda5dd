"""The keys' limits in the document: x-ratelimit-* headers and 429s on the submits."""

from __future__ import annotations

from web.openapi.parts import SUBMITS
from web.openapi.schemas import Schema

_LIMITED = (
    "`rate_limit_exceeded`: over the key's request rate (CHATQ_RATE_LIMIT), or over "
    "its requests or tokens per minute (CHATQ_KEY_*: `Retry-After`, `retry-after-ms` "
    "and `x-ratelimit-*` say when it will pass; a request larger than a minute's "
    "tokens never will: `x-should-retry: false`); `insufficient_quota`: over the key's "
    "daily or monthly token budget (`x-should-retry: false`, no `Retry-After`)."
)
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
