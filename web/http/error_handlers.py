"""One error path: every failure becomes OpenAI's error shape, never a traceback."""

from __future__ import annotations

import logging
from functools import partial

import redis
from flask import Flask, Response, request
from flask.globals import request_ctx
from kombu.exceptions import OperationalError
from werkzeug.exceptions import HTTPException

from chatq.errors import ApiError, backend_unavailable
from chatq.topology import BACKEND_ERRORS, is_backend_error
from web.http.answers import json_response, options_response
from web.http.headers import ALLOW, RETRY_AFTER

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    431: "request_header_fields_too_large",
}


def api_error_response(error: ApiError) -> Response:
    """The JSON answer for an ApiError, with Retry-After where it applies."""
    headers = {}
    if error.retry_after_s is not None:
        headers[RETRY_AFTER.name] = str(error.retry_after_s)
    return json_response(error.body(), error.status, headers)


def _http_error(exc: HTTPException) -> Response:
    status = exc.code or 500
    code = _HTTP_CODES.get(status, "http_error")
    message = exc.description or exc.name
    if status == 413:
        limit = request.max_content_length  # the app's, CHATQ_MAX_BODY_BYTES
        message = f"The request body is larger than {limit} bytes."
    response = api_error_response(ApiError(status, code, message))
    if status == 405 and exc.valid_methods:  # type: ignore[attr-defined]
        response.headers[ALLOW.name] = ", ".join(exc.valid_methods)  # type: ignore[attr-defined]
    return response


def _backend_error(retry_after_s: int, exc: Exception) -> Response:
    log.warning("backend unavailable: %s", type(exc).__name__)
    return api_error_response(backend_unavailable(retry_after_s))


def _redis_reply(retry_after_s: int, exc: Exception) -> Response:
    """An error reply from Redis: 503 when it says Redis cannot serve now, else a 500."""
    return _backend_error(retry_after_s, exc) if is_backend_error(exc) else _unexpected(exc)


def _unexpected(exc: Exception) -> Response:
    log.exception("unhandled error")
    error = ApiError(500, "internal_error", "Internal error.", type_="server_error")
    return api_error_response(error)


def _options() -> Response | None:
    """OPTIONS of a route, or of the server (`OPTIONS *`): 204 with Allow, never HTML.

    An unknown path goes on to the JSON 404 like any other method.
    """
    adapter = request_ctx.url_adapter
    if request.method != "OPTIONS" or adapter is None:
        return None
    if request.environ.get("RAW_URI") == "*":
        return options_response(m for rule in adapter.map.iter_rules() for m in rule.methods or ())
    if request.url_rule is None:
        return None
    return options_response(adapter.allowed_methods())


def register(app: Flask, backend_retry_after_s: int) -> None:
    """Install the handlers on `app`, and OPTIONS answered without HTML; a backend that
    cannot serve is a 503 with `Retry-After: backend_retry_after_s`."""
    app.before_request(_options)
    app.register_error_handler(ApiError, api_error_response)
    app.register_error_handler(HTTPException, _http_error)
    for exc_type in (*BACKEND_ERRORS, OperationalError):
        app.register_error_handler(exc_type, partial(_backend_error, backend_retry_after_s))
    app.register_error_handler(redis.ResponseError, partial(_redis_reply, backend_retry_after_s))
    app.register_error_handler(Exception, _unexpected)
