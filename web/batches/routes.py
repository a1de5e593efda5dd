"""OpenAI's Batches API: create a batch on an uploaded file, read it (long-polled), list, cancel."""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Blueprint, Flask, Response
from flask import request as current_request

from chatq.batches import file_records as files_meta
from chatq.batches import record as batches
from chatq.batches.lines import ENDPOINTS
from chatq.batches.objects import BatchList, page_view
from chatq.errors import ApiError
from chatq.responses.objects import (
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
    MAX_METADATA_VALUE_CHARS,
)
from web.admission import holds
from web.batches import file_routes
from web.batches.file_routes import batch_services, expires_after_s, file_not_found, owned_file
from web.context import Services, authorize, services
from web.http import params
from web.http.answers import json_response, preference_applied
from web.metrics import series as metrics
from web.tracing import spans as tracing

log = logging.getLogger(__name__)
bp = Blueprint("batches", __name__, url_prefix="/v1/batches")
FIELDS = ("input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after")
MAX_BATCH_LIST_LIMIT, DEFAULT_BATCH_LIST_LIMIT = 100, 20


def _invalid(message: str, param: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, code, message, param=param)


def _required_text(body: dict[str, Any], name: str) -> str:
    if name not in body:
        raise _invalid(f"`{name}` is required.", name, "missing_field")
    value = body[name]
    if not isinstance(value, str):
        raise _invalid(f"`{name}` must be a string.", name)
    return value


def _metadata(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_METADATA_KEYS:
        raise _invalid(
            f"`metadata` must be an object of at most {MAX_METADATA_KEYS} pairs.", "metadata"
        )
    for key, item in value.items():
        if (
            len(key) > MAX_METADATA_KEY_CHARS
            or not isinstance(item, str)
            or len(item) > MAX_METADATA_VALUE_CHARS
        ):
            raise _invalid(
                f"`metadata` keys are at most {MAX_METADATA_KEY_CHARS} characters "
                f"and values strings of at most {MAX_METADATA_VALUE_CHARS}.",
                "metadata",
            )
    return value


def _output_expires_s(value: Any, default_s: int) -> int:
    if value is None:
        return default_s
    if not isinstance(value, dict):
        raise _invalid("`output_expires_after` must be an object.", "output_expires_after")
    unknown = sorted(set(value) - {"anchor", "seconds"})
    if unknown:
        raise _invalid(
            f"`output_expires_after.{unknown[0][:40]}` is not supported here.",
            f"output_expires_after.{unknown[0][:40]}",
        )
    return expires_after_s(value.get("anchor"), value.get("seconds"), "output_expires_after")


def _new_record(body: dict[str, Any], owner: str, default_expires_s: int) -> dict[str, str]:
    """The record of the batch the body asks for; 400 naming what is wrong."""
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise _invalid(f"`{unknown[0]}` is not supported here.", unknown[0])
    file_id = _required_text(body, "input_file_id")
    endpoint = _required_text(body, "endpoint")
    if endpoint not in ENDPOINTS:
        raise _invalid(f"`endpoint` must be one of {', '.join(ENDPOINTS)}.", "endpoint")
    if _required_text(body, "completion_window") != "24h":
        raise _invalid("`completion_window` must be 24h.", "completion_window")
    return batches.new_record(
        batch_id=batches.new_batch_id(),
        owner=owner,
        endpoint=endpoint,
        input_file_id=file_id,
        metadata=_metadata(body.get("metadata")),
        output_expires_s=_output_expires_s(body.get("output_expires_after"), default_expires_s),
    )


@bp.post("")
def create_batch() -> Response:
    """Create a batch on an uploaded file; it is validated and run by the workers."""
    svc, bsvc = services(), batch_services()
    owner = authorize(svc)
    record = _new_record(params.json_body(), owner, svc.settings.files_ttl_s)
    record |= tracing.job_fields()  # its lines' traces link to it
    meta = owned_file(record["input_file_id"], owner, "input_file_id")
    if meta.get("purpose") != files_meta.PURPOSE_INPUT:
        raise _invalid(
            "`input_file_id` must name a file uploaded with purpose batch.", "input_file_id"
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
    wait_s, asked = params.requested_wait(0.0, svc.settings.max_wait_s)
    record = _owned(svc, batch_id, owner)
    if record["status"] not in batches.ENDED:
        record = _wait_ended(svc, record, params.jittered(holds.poll_wait(svc, owner, wait_s)))
    applied = preference_applied(wait_s if asked else None)
    return json_response(
        batches.public_view(record), 200, {"Preference-Applied": applied} if applied else None
    )


@bp.get("")
def list_batches() -> Response:
    """The key's batches, newest first, `after` a batch id, `limit` 1 to 100."""
    svc = services()
    owner = authorize(svc)
    limit = params.limit_arg(DEFAULT_BATCH_LIST_LIMIT, MAX_BATCH_LIST_LIMIT)
    records, has_more = batch_services().batches.page(
        owner, current_request.args.get("after", ""), limit
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
