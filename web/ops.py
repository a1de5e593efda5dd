"""Operations endpoints: liveness, readiness, the OpenAPI document."""

from __future__ import annotations

from flask import Blueprint, Response

from chatq.redis_conn import BACKEND_ERRORS
from web.context import services
from web.openapi import document
from web.responses import json_response

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """200 while the process runs."""
    return json_response({"status": "ok"})


@bp.get("/readyz")
def readyz() -> Response:
    """200 when Redis answers, else 503."""
    svc = services()
    try:
        svc.redis.ping()
    except BACKEND_ERRORS:
        headers = {"Retry-After": str(svc.settings.backend_retry_after_s)}
        return json_response({"status": "unavailable", "redis": False}, 503, headers)
    return json_response({"status": "ok", "redis": True})


@bp.get("/openapi.json")
def openapi() -> Response:
    """The OpenAPI 3.1 document of this API."""
    return json_response(document())
