"""The webhook endpoints of a key: create, list, read, delete, rotate the secret, enable, and
the delivery log with replay."""

from __future__ import annotations

import logging
from typing import TypeVar
from urllib.parse import urlsplit

import msgspec
from flask import Blueprint, Response, request
from msgspec import UNSET, structs

from chatq.chat import convert
from chatq.config import url_problem
from chatq.errors import ApiError
from chatq.webhooks import (
    API,
    EVENT_TYPES,
    MAX_ENDPOINTS_PER_KEY,
    Endpoint,
    Event,
    RotateSecretRequest,
    WebhookDeliveryList,
    WebhookEndpointDeleted,
    WebhookEndpointList,
    WebhookEndpointRequest,
    literal_refused,
    new_delivery_id,
    public_view,
)
from web import http
from web.context import Services, authorize, services
from web.http import DELIVERIES_AFTER, DELIVERIES_LIMIT, json_response
from web.webhooks.recipients import WebhookServices, webhook_services

log = logging.getLogger(__name__)
bp = Blueprint("webhooks", __name__, url_prefix="/v1/webhooks")
T = TypeVar("T")


def _not_found() -> ApiError:
    return ApiError(404, "webhook_not_found", "No webhook endpoint with that id.", param="id")


def _caller() -> tuple[Services, WebhookServices, str]:
    svc = services()
    owner = authorize(svc)
    return svc, webhook_services(svc), owner


def _owned(hooks: WebhookServices, owner: str, endpoint_id: str) -> Endpoint:
    endpoint = hooks.endpoints.owned(owner, endpoint_id)
    if endpoint is None:
        raise _not_found()
    return endpoint


def _made_here(endpoint: Endpoint) -> None:
    if endpoint.source != API:
        raise ApiError(
            409,
            "webhook_from_config",
            "This endpoint comes from the server's "
            "configuration (CHATQ_WEBHOOKS); change it there.",
            param="id",
        )


def _body(struct: type[T]) -> T:
    """The JSON body as `struct` (an empty one when none was sent); else a 400 naming the
    field."""
    return convert(http.json_body() if request.content_length or request.data else {}, struct)


def _url(svc: Services, raw: str) -> str:
    problem = url_problem(raw)
    private = not svc.settings.webhook_allow_private
    if problem is None and private and literal_refused(urlsplit(raw).hostname or ""):
        raise ApiError(
            400,
            "webhook_url_refused",
            "`url` points at an address webhooks may not reach (loopback, private, "
            "link-local, reserved, or an IPv6 form of one): only globally routable ones.",
            param="url",
        )
    if problem:
        raise ApiError(400, "invalid_request", f"`url`: {problem}.", param="url")
    return raw


@bp.post("")
def create_endpoint() -> Response:
    """A new endpoint of the caller's key; the answer carries its signing secret, once."""
    svc, hooks, owner = _caller()
    asked = _body(WebhookEndpointRequest)
    url, name = _url(svc, asked.url), "" if asked.name is UNSET else asked.name
    event_types = EVENT_TYPES if asked.event_types is UNSET else asked.event_types
    endpoint = hooks.endpoints.create(owner, url, name, tuple(dict.fromkeys(event_types)))
    if endpoint is None:
        raise ApiError(
            409,
            "too_many_webhooks",
            f"A key has at most {MAX_ENDPOINTS_PER_KEY} webhook endpoints; delete one first.",
        )
    log.info(
        "webhook endpoint %s created", endpoint.id, extra={"key": owner, "event": "webhook_created"}
    )
    return json_response(endpoint.public(with_secret=True))


@bp.get("")
def list_endpoints() -> Response:
    """The caller's endpoints, without secrets."""
    _svc, hooks, owner = _caller()
    data = [e.public() for e in hooks.endpoints.of_owner(owner)]
    return json_response(msgspec.to_builtins(WebhookEndpointList("list", data, False)))  # type: ignore[arg-type]


@bp.get("/<endpoint_id>")
def get_endpoint(endpoint_id: str) -> Response:
    """One endpoint, without its secret."""
    _svc, hooks, owner = _caller()
    return json_response(_owned(hooks, owner, endpoint_id).public())


@bp.delete("/<endpoint_id>")
def delete_endpoint(endpoint_id: str) -> Response:
    """Delete an endpoint made through the API, and its deliveries (an attempt running ends)."""
    _svc, hooks, owner = _caller()
    endpoint = _owned(hooks, owner, endpoint_id)
    _made_here(endpoint)
    hooks.endpoints.delete(endpoint)
    hooks.deliveries.forget(endpoint.id)
    deleted = WebhookEndpointDeleted(endpoint.id, "webhook_endpoint.deleted", True)
    return json_response(structs.asdict(deleted))


@bp.post("/<endpoint_id>/rotate_secret")
def rotate_secret(endpoint_id: str) -> Response:
    """A new signing secret; the old one may keep signing beside it for 24 hours."""
    _svc, hooks, owner = _caller()
    endpoint = _owned(hooks, owner, endpoint_id)
    _made_here(endpoint)
    keep_old = _body(RotateSecretRequest).keep_old_secret_active_for_24_hours or False
    return json_response(hooks.endpoints.rotate(endpoint, keep_old).public(with_secret=True))


@bp.post("/<endpoint_id>/enable")
def enable_endpoint(endpoint_id: str) -> Response:
    """Deliver to a disabled endpoint again (new events; replay the ones it missed)."""
    _svc, hooks, owner = _caller()
    endpoint = _owned(hooks, owner, endpoint_id)
    hooks.endpoints.enable(endpoint)
    return json_response(_owned(hooks, owner, endpoint_id).public())


@bp.get("/<endpoint_id>/deliveries")
def list_deliveries(endpoint_id: str) -> Response:
    """The endpoint's deliveries, newest first; `after` pages on from a delivery id."""
    _svc, hooks, owner = _caller()
    endpoint = _owned(hooks, owner, endpoint_id)
    records, more = hooks.deliveries.page(
        endpoint.id, http.whole(DELIVERIES_LIMIT), http.text(DELIVERIES_AFTER)
    )
    deliveries = WebhookDeliveryList("list", [public_view(r) for r in records], more)  # type: ignore[misc]
    return json_response(msgspec.to_builtins(deliveries))


@bp.post("/<endpoint_id>/deliveries/<delivery_id>/replay")
def replay_delivery(endpoint_id: str, delivery_id: str) -> Response:
    """Send a delivery's event again, as a new delivery with the same `webhook-id`."""
    svc, hooks, owner = _caller()
    endpoint = _owned(hooks, owner, endpoint_id)
    record = hooks.deliveries.get(delivery_id)
    if record is None or record.get("endpoint") != endpoint.id:
        raise ApiError(
            404,
            "delivery_not_found",
            "No delivery with that id at this endpoint.",
            param="delivery_id",
        )
    if endpoint.disabled:
        raise ApiError(
            409, "webhook_disabled", "This endpoint is disabled; enable it first.", param="id"
        )
    replay_id = new_delivery_id()
    svc.admission.charge_request(owner, replay_id)
    # Due now in Redis: a worker's delivery pool takes it within a second.
    hooks.deliveries.add(replay_id, endpoint, Event.parse(record["body"]), replay_of=delivery_id)
    return json_response(public_view(hooks.deliveries.get(replay_id) or {"id": replay_id}))
