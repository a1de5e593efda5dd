"""OpenAI-style error objects and the exception that carries one to the client."""

from __future__ import annotations

import json

from aiohttp import web

_DEFAULT_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


class ApiError(Exception):
    """An error answered as OpenAI's `{"error": {...}}` object."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        retry_after: str | None = None,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.retry_after = retry_after
        self.kind = kind  # OpenAI's `type`, when the status alone does not tell it
        self.headers = dict(headers or {})


def error_type(status: int) -> str:
    """Return OpenAI's error `type` for an HTTP status."""
    if status == 429:
        return "requests"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def simulated_error(status: int, retry_after: str | None) -> ApiError:
    """Return the error answered for the `status` knob."""
    if status == 429:
        message = "Rate limit reached for fake (simulated by fakellm)."
    elif status >= 500:
        message = f"The server had an error while processing your request (simulated {status})."
    else:
        message = f"Simulated error {status} from fakellm."
    return ApiError(status, message, code=_DEFAULT_CODES.get(status), retry_after=retry_after)


def error_body(error: ApiError) -> bytes:
    """Serialise an error as OpenAI's error object."""
    payload = {
        "error": {
            "message": error.message,
            "type": error.kind or error_type(error.status),
            "param": error.param,
            "code": error.code,
        }
    }
    return json.dumps(payload).encode()


def error_response(error: ApiError) -> web.Response:
    """Build the HTTP response for an error."""
    headers = dict(error.headers)
    if error.retry_after is not None:
        headers["Retry-After"] = error.retry_after
    return web.Response(
        status=error.status,
        body=error_body(error),
        content_type="application/json",
        headers=headers,
    )
