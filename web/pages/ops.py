"""Operations endpoints: liveness, readiness, the OpenAPI document."""

from __future__ import annotations

import msgspec
from flask import Blueprint, Flask, Response, current_app, request
from msgspec import UNSET

from chatq import metrics as chatq_metrics
from chatq import topology
from chatq.errors import ApiError, backend_unavailable
from chatq.metrics import Health, Readiness, Scrape, metrics_refusal, scrape_access
from chatq.topology import BACKEND_ERRORS
from web.context import authorize, services
from web.http import json_response
from web.metrics import EXTENSION
from web.openapi import served
from web.pages import demo, usage
from web.pages.scrape import render_metrics

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """200 while the process runs."""
    return json_response(msgspec.to_builtins(Health("ok")))


@bp.get("/readyz")
def readyz() -> Response:
    """200 when Redis answers, with whether it keeps jobs; 503 when not (or unsafe, if required)."""
    svc = services()
    try:
        svc.redis.ping()
        safety = topology.inspect(svc.redis)
    except BACKEND_ERRORS as exc:
        raise backend_unavailable(svc.settings.backend_retry_after_s) from exc
    if svc.settings.redis_require_safe and not safety.safe:
        raise ApiError(
            503,
            "redis_unsafe",
            "Redis may lose jobs: " + "; ".join(safety.problems()),
            type_="server_error",
            retry_after_s=svc.settings.backend_retry_after_s,
        )
    primary = topology.primary_address(svc.redis)  # behind Sentinel: the one written to now
    ready = Readiness(
        status="ok",
        redis=True,
        redis_noeviction=safety.noeviction,
        redis_persistent=safety.persistent,
        redis_primary=UNSET if primary is None else primary,
    )
    return json_response(msgspec.to_builtins(ready))


@bp.get("/v1/queue")
def queue() -> Response:
    """Queue depth, age, workers and rates, for people and autoscalers: the whole picture to
    an admin key (CHATQ_ADMIN_KEYS), the key's own share to any other."""
    svc = services()
    owner = authorize(svc)
    if owner not in svc.settings.admin_key_names:
        return json_response(chatq_metrics.share(svc.redis, svc.broker, owner).body())
    return json_response(chatq_metrics.snapshot(svc.redis, svc.broker).body())


@bp.get("/metrics")
def metrics() -> Response:
    """Prometheus text format: HTTP, long-poll, cache and queue metrics of this web; those
    that name a key only with `Authorization: Bearer <CHATQ_METRICS_TOKEN>`."""
    svc = services()
    access = scrape_access(request.headers.get("Authorization", ""), svc.settings.metrics_token)
    if access is Scrape.REFUSED:
        raise metrics_refusal()
    http = current_app.extensions.get(EXTENSION)
    body, content_type = render_metrics(svc, tenants=access is Scrape.ALL, http=http)
    return Response(body, content_type=content_type)


@bp.get("/openapi.json")
def openapi() -> Response:
    """The OpenAPI 3.1 document of this API."""
    return Response(served(services().settings), mimetype="application/json")


def register(app: Flask) -> None:
    """The server's own pages: these, GET /v1/usage and the demo's."""
    app.register_blueprint(bp)
    app.register_blueprint(usage.bp)
    app.register_blueprint(demo.bp)
