"""OpenAI's Batches API: create a batch on an uploaded file, read it (long-polled), list, cancel."""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Blueprint, Flask, Response
from msgspec import UNSET

from chatq import batches
from chatq.batches import BatchCreateRequest, BatchList, page_view
from chatq.chat import convert
from chatq.errors import ApiError
from web import admission, http, metrics, tracing
from web.batches import file_routes
from web.batches.file_routes import batch_services, file_not_found, owned_file
from web.context import Services, authorize, services
from web.http import BATCHES_AFTER, BATCHES_LIMIT, WAIT, json_response, preference_applied

log = logging.getLogger(__name__)
bp = Blueprint("batches", __name__, url_prefix="/v1/batches")


def _new_record(body: dict[str, Any], owner: str, default_expires_s: int) -> dict[str, str]:
    """The record of the batch the body asks for; 400 naming what is wrong."""
    asked = convert(body, BatchCreateRequest)
    expires = asked.output_expires_after
    return batches.new_record(
        batch_id=batches.new_batch_id(),
        owner=owner,
        endpoint=asked.endpoint,
        input_file_id=asked.input_file_id,
        metadata=None if asked.metadata is UNSET else asked.metadata,
        output_expires_s=default_expires_s if expires is UNSET else expires.seconds,
    )


@bp.post("")
def create_batch() -> Response:
    """Create a batch on an uploaded file; it is validated and run by the workers."""
    svc, bsvc = services(), batch_services()
    owner = authorize(svc)
    record = _new_record(http.json_body(), owner, svc.settings.files_ttl_s)
    record |= tracing.job_fields()  # its lines' traces link to it
    meta = owned_file(record["input_file_id"], owner, "input_file_id")
    if meta.get("purpose") != batches.PURPOSE_INPUT:
        raise ApiError(
            400,
            "invalid_request",
            "`input_file_id` must name a file uploaded with purpose batch.",
            param="input_file_id",
        )
    max_active = svc.settings.batch_max_active_per_key
    created = bsvc.batches.create(record, svc.settings.batch_window_s, max_active)
    if created == "limit":
        raise too_many_active(owner, max_active)
    if created != "created":
        raise file_not_found("input_file_id")  # deleted or expired since it was read
    log.info(
        "batch %s created on %s",
        record["id"],
        record["input_file_id"],
        extra={"key": owner, "event": "batch_created"},
    )
    return json_response(batches.public_view(_owned(svc, record["id"], owner)))


def too_many_active(owner: str, max_active: int) -> ApiError:
    """429: the key has CHATQ_BATCH_MAX_ACTIVE_PER_KEY batches not yet ended."""
    return ApiError(
        429,
        "active_batch_limit_exceeded",
        f"Active batch limit reached for key {owner}. Limit: {max_active} batches not yet "
        "ended (CHATQ_BATCH_MAX_ACTIVE_PER_KEY). Please try again once some of its batches "
        "have ended, or cancel one.",
    )


def batch_not_found() -> ApiError:
    """An unknown, expired or foreign batch: all look the same."""
    return ApiError(404, "batch_not_found", "No batch with that id.", param="id")


def _owned(svc: Services, batch_id: str, owner: str) -> dict[str, str]:
    if not batches.is_batch_id(batch_id):
        raise batch_not_found()
    record = batch_services().batches.get(batch_id)
    if record is None or record.get("owner") != owner:
        raise batch_not_found()
    return record


def _wait_ended(svc: Services, record: dict[str, str], timeout_s: float) -> dict[str, str]:
    """The record once the batch has ended, or as it is when `timeout_s` runs out."""
    listener, batch_id, owner = svc.listener, record["id"], record["owner"]
    if record["status"] in batches.ENDED or timeout_s <= 0 or listener.stops(False):
        return record
    deadline = time.monotonic() + timeout_s
    with listener.waiting(batch_id, False) as waiter, metrics.WAITERS.track_inprogress():
        record = _owned(svc, batch_id, owner)  # after registering: no change is missed
        while record["status"] not in batches.ENDED and not listener.stops(False):
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                break
            if waiter.wait(remaining_s):
                record = _owned(svc, batch_id, owner)
    return record


@bp.get("/<batch_id>")
def get_batch(batch_id: str) -> Response:
    """The batch; with `wait`, held until it has ended or the wait runs out."""
    svc = services()
    owner = authorize(svc)
    wait_s, asked = http.requested_wait(WAIT, svc.settings)
    record = _owned(svc, batch_id, owner)
    if record["status"] not in batches.ENDED:
        poll_s = http.jittered(admission.poll_wait(svc.held, owner, wait_s))
        record = _wait_ended(svc, record, poll_s)
    applied = preference_applied(wait_s if asked else None)
    return json_response(
        batches.public_view(record),
        200,
        {http.PREFERENCE_APPLIED.name: applied} if applied else None,
    )


@bp.get("")
def list_batches() -> Response:
    """The key's batches, newest first, `after` a batch id, `limit` 1 to 100."""
    svc = services()
    owner = authorize(svc)
    records, has_more = batch_services().batches.page(
        owner, http.text(BATCHES_AFTER) or "", http.whole(BATCHES_LIMIT)
    )
    data = [batches.public_view(r) for r in records]
    return json_response(page_view(BatchList, data, has_more))


@bp.post("/<batch_id>/cancel")
def cancel_batch(batch_id: str) -> Response:
    """Stop a batch: `cancelling` until its running lines end and its files are written."""
    svc = services()
    owner = authorize(svc)
    _owned(svc, batch_id, owner)
    status = batch_services().batches.cancel(batch_id)
    log.info("batch %s cancel: %s", batch_id, status, extra={"key": owner, "event": "batch_cancel"})
    return json_response(batches.public_view(_owned(svc, batch_id, owner)))


def register(app: Flask) -> None:
    """The Files and Batches endpoints, and their services (after the job services)."""
    file_routes.install(app)
    app.register_blueprint(file_routes.bp)
    app.register_blueprint(bp)
