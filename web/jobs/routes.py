"""The job endpoints: submit, status, result, cancel."""

from __future__ import annotations

import logging

from flask import Blueprint, Flask, Response, g

from chatq import jobs
from chatq.chat import chat_request, fit_context
from chatq.errors import ApiError, job_not_found
from web import admission, http
from web.context import Services, authorize, services
from web.http import (
    CACHE_CONTROL,
    IDEMPOTENCY_KEY,
    PRIORITY,
    RESULT_WAIT,
    WAIT,
    Param,
    failed_job_error,
    job_response,
    json_response,
)
from web.jobs import events
from web.jobs.submission import enqueue_detached, job_id_for, submit
from web.jobs.waiting import before_park, load_owned, wait_owned, wait_terminal, watching

log = logging.getLogger(__name__)
bp = Blueprint("jobs", __name__, url_prefix="/v1/jobs")


def _owned(svc: Services, owner: str, job_id: str, wait_s: float = 0.0) -> dict[str, str]:
    """The owner's job (else 404), once it ends if `wait_s` is given."""
    if not http.is_job_id(job_id):
        raise job_not_found()
    g.chatq_job_id = job_id
    return wait_owned(svc, job_id, owner, wait_s)


def _wait(svc: Services, param: Param) -> tuple[float, float | None]:
    wait_s, asked = http.requested_wait(param, svc.settings)
    return wait_s, (wait_s if asked else None)


def _poll_wait(svc: Services, owner: str, param: Param) -> tuple[float, float | None]:
    """A long-poll's wait: 0 when the key holds its cap of requests open
    (web/admission/holds.py)."""
    wait_s, echo = _wait(svc, param)
    return admission.poll_wait(svc.held, owner, wait_s), echo


@bp.post("")
def create_job() -> Response:
    """Enqueue a chat job; answer at once, or when it ends if `wait` is given."""
    svc = services()
    owner = authorize(svc)
    wait_s, echo = _wait(svc, WAIT)
    priority = http.choice(PRIORITY, svc.settings)
    idem_key = http.text(IDEMPOTENCY_KEY)
    body = http.json_body()
    if body.get("stream") is True:
        raise ApiError(
            400,
            "invalid_request",
            "`stream` is not allowed here; read /v1/jobs/{id}/events instead.",
            param="stream",
        )
    request = chat_request(body, svc.settings)
    overflow = http.overflow_policy(svc.settings)
    fitted = fit_context(request, svc.settings.max_context_tokens, overflow)
    request = fitted.request
    request.pop("stream", None)
    if wait_s > 0:
        admission.hold(svc.held, owner)
    cache_control = http.text(CACHE_CONTROL) or ""
    job_id = job_id_for(svc, owner, request, cache_control)
    with watching(svc, job_id, wait_s) as waiter:
        record = before_park(
            waiter is not None,
            submit,
            svc,
            owner,
            request,
            priority,
            idem_key,
            cache_control,
            job_id=job_id,
            prompt_tokens=fitted.prompt_tokens,
        )
        g.chatq_job_id = record["id"]
        return job_response(wait_terminal(svc, record, wait_s, waiter=waiter), echo)


@bp.get("/<job_id>")
def get_job(job_id: str) -> Response:
    """The job; with `wait`, held until it ends or the wait runs out."""
    svc = services()
    owner = authorize(svc)
    wait_s, echo = _poll_wait(svc, owner, WAIT)
    return job_response(_owned(svc, owner, job_id, wait_s), echo)


@bp.get("/<job_id>/result")
def get_result(job_id: str) -> Response:
    """The bare upstream completion once completed; its error once failed."""
    svc = services()
    owner = authorize(svc)
    wait_s, echo = _poll_wait(svc, owner, RESULT_WAIT)
    record = _owned(svc, owner, job_id, wait_s)
    if record["status"] == jobs.COMPLETED:
        headers = {http.PREFERENCE_APPLIED.name: f"wait={echo:g}"} if echo is not None else {}
        return json_response(jobs.public_view(record)["result"], 200, headers)
    if jobs.is_terminal(record["status"]):
        raise failed_job_error(record)
    return job_response(record, echo)


@bp.post("/<job_id>/cancel")
def cancel_job(job_id: str) -> Response:
    """Cancel a queued or running job; a terminal one is left as it is."""
    svc = services()
    owner = authorize(svc)
    _owned(svc, owner, job_id)
    cancel = svc.store.cancel(job_id=job_id, lease_s=svc.settings.lease_s)
    log.info(
        "job %s cancel: %s",
        job_id,
        cancel.status,
        extra={"job_id": job_id, "key": owner, "event": "cancel"},
    )
    enqueue_detached(svc, cancel.detached)
    record = load_owned(svc, job_id, owner)
    return json_response(jobs.public_view(record))


def register(app: Flask) -> None:
    """The job endpoints, and their events'."""
    app.register_blueprint(bp)
    app.register_blueprint(events.bp)
