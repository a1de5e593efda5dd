"""The keys' limits in the document: x-ratelimit-* headers and 429s on the submits."""

from __future__ import annotations

from web.http import REQUEST_LIMITS, RETRY_AFTER_MS, SHOULD_RETRY, TOKEN_LIMITS
from web.openapi.parts import SUBMITS, header_ref
from web.openapi.schemas import Schema

_LIMITED = (
    "`rate_limit_exceeded`: over the key's request rate (CHATQ_RATE_LIMIT), or over "
    "its requests or tokens per minute (CHATQ_KEY_*: `Retry-After`, `retry-after-ms` "
    "and `x-ratelimit-*` say when it will pass; a request larger than a minute's "
    "tokens never will: `x-should-retry: false`); `insufficient_quota`: over the key's "
    "daily or monthly token budget (`x-should-retry: false`, no `Retry-After`)."
)
_LIMITS = (*REQUEST_LIMITS, *TOKEN_LIMITS)
_ON_429 = (*_LIMITS, RETRY_AFTER_MS, SHOULD_RETRY)


def add_headers(all_paths: dict[str, Schema]) -> dict[str, Schema]:
    """The x-ratelimit-* headers on the answers of the submits, and their 429s."""
    for path, method in SUBMITS:
        op = all_paths.get(path, {}).get(method)
        if op is None:
            continue
        for status, response in op["responses"].items():
            if status == "429":
                response["description"] = _LIMITED
            if int(status) < 300 or status == "429":
                named = _ON_429 if status == "429" else _LIMITS
                response.setdefault("headers", {}).update({h.name: header_ref(h) for h in named})
    return all_paths
