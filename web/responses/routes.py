"""OpenAI's Responses API, text subset, over chatq jobs: create (background, held or
streamed), retrieve (long-polled, or a stream resumed after any sequence number), cancel,
delete. A response is a job: `resp_<token>` here is `job_<token>` at /v1/jobs."""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Response, g
from flask import request as flask_request
from msgspec import structs

from chatq import jobs
from chatq.chat import Policy, chat_request, fit_context
from chatq.errors import ApiError
from chatq.jobs import erase
from chatq.responses import (
    ResponseDeleted,
    checked_request,
    conversation,
    given,
    invalid,
    is_stored,
    job_id_of,
    render,
    response_id,
    translate,
    unsupported,
)
from web import admission, http
from web.context import Services, authorize, services
from web.http import (
    CACHE_CONTROL,
    IDEMPOTENCY_KEY,
    INCLUDE_OBFUSCATION,
    PRIORITY,
    RESPONSE_WAIT,
    RESUME_AFTER,
    STARTING_AFTER,
    STREAM,
    json_response,
    preference_applied,
)
from web.jobs import (
    before_park,
    enqueue_detached,
    load_owned,
    sse_response,
    submit,
    wait_terminal,
)
from web.responses.stream import response_stream

log = logging.getLogger(__name__)
bp = Blueprint("responses", __name__, url_prefix="/v1/responses")


def response_not_found(param: str = "id") -> ApiError:
    """Unknown, expired, deleted, unstored or another key's: all look the same."""
    return ApiError(404, "response_not_found", "No response with that id.", param=param)


def owned_response(svc: Services, owner: str, any_id: str) -> dict[str, str]:
    """The stored response `any_id` (`resp_…`, or its `job_…`) of `owner`; else 404."""
    job_id = job_id_of(any_id)
    if job_id is None:
        raise response_not_found()
    g.chatq_job_id = job_id
    record = svc.store.get(job_id)
    if record is None or record.get("owner") != owner or not is_stored(record):
        raise response_not_found()
    return record


def _history(svc: Services, owner: str, previous: str | None) -> list[dict[str, Any]] | None:
    """The conversation a `previous_response_id` continues: its input and output."""
    if previous is None:
        return None
    try:
        record = owned_response(svc, owner, previous)
    except ApiError:
        raise ApiError(
            400,
            "previous_response_not_found",
            f"Previous response with id {previous[:80]!r} not found.",
            param="previous_response_id",
        ) from None
    if record["status"] != jobs.COMPLETED:
        raise invalid(
            f"Previous response {previous[:80]!r} is {record['status']}; only a "
            "completed one can be continued.",
            "previous_response_id",
        )
    return conversation(record)


def _overflow(svc: Services, truncate: bool | None) -> Policy:
    if truncate is None:
        return http.overflow_policy(svc.settings)
    return "truncate_oldest" if truncate else "reject"


@bp.post("")
def create_response() -> Response:
    """Create a response: background (answered at once), held until it ends, or streamed."""
    svc = services()
    owner = authorize(svc)
    req = checked_request(http.json_body())
    asked = translate(req, svc.settings, _history(svc, owner, given(req.previous_response_id)))
    request = chat_request(asked.request, svc.settings)
    fitted = fit_context(request, svc.settings.max_context_tokens, _overflow(svc, asked.truncate))
    held = asked.stream or not asked.background  # a background response answers at once
    if held and admission.holds_open(asked.stream, svc.settings.max_wait_s):
        admission.hold(svc.held, owner)
    cache_control = http.text(CACHE_CONTROL) or ""
    record = before_park(
        held and not asked.stream,
        submit,
        svc,
        owner,
        fitted.request,
        http.choice(PRIORITY, svc.settings),
        http.text(IDEMPOTENCY_KEY),
        cache_control,
        asked.fields,
        prompt_tokens=fitted.prompt_tokens,
    )
    g.chatq_job_id = record["id"]
    headers = {http.JOB_ID_HEADER.name: record["id"]}
    if asked.stream:
        cancel = svc.settings.cancel_on_disconnect and not asked.background
        response = sse_response(response_stream(svc, record, -1, cancel, not asked.store))
        response.headers.update(headers)
        return response
    if asked.background:
        headers[http.LOCATION.name] = f"/v1/responses/{response_id(record['id'])}"
        return json_response(render(record), 200, headers)
    return _held(svc, record, headers, asked.store)


def _held(svc: Services, record: dict[str, str], headers: dict[str, str], store: bool) -> Response:
    """The response once it ends (up to CHATQ_JOB_TIMEOUT), or when `Prefer: wait=N` runs
    out; 200 whatever its status, so that an SDK never resends a job that exists."""
    asked_s, respond_async = http.prefer_wait(), http.prefers_async()
    if asked_s is not None or respond_async:
        wait_s = min(asked_s or 0.0, svc.settings.max_wait_s)
        record = wait_terminal(svc, record, wait_s)
        applied = preference_applied(None if asked_s is None else wait_s, respond_async)
        if applied:
            headers[http.PREFERENCE_APPLIED.name] = applied
    else:
        hold_s = svc.settings.job_timeout_s + svc.settings.lease_s
        record = wait_terminal(svc, record, hold_s, through_drain=True)
    body = render(record)
    if not store and jobs.is_terminal(record["status"]):
        erase(svc.store, record["id"], svc.settings.lease_s)  # `store: false`: answered, gone
    return json_response(body, 200, headers)


def _starting_after(stream: bool) -> int:
    """`?starting_after=N` (or an SSE `Last-Event-ID`): stream events after number N. Without
    `stream=true` there is no stream to start: both are ignored."""
    if not stream:
        return -1
    sent = http.text(STARTING_AFTER) is not None
    return max(http.whole(STARTING_AFTER if sent else RESUME_AFTER), -1)


def _check_retrieve_options() -> None:
    if any(flask_request.args.getlist("include")) or any(flask_request.args.getlist("include[]")):
        raise unsupported("include")
    if http.flag(INCLUDE_OBFUSCATION):
        raise unsupported("include_obfuscation")


@bp.get("/<rid>")
def get_response(rid: str) -> Response:
    """The response; `wait` holds until it ends; `stream=true` replays its events after
    `starting_after`, then follows them until it ends."""
    svc = services()
    owner = authorize(svc)
    stream = http.flag(STREAM)
    starting_after = _starting_after(stream)
    _check_retrieve_options()
    wait_s, asked = http.requested_wait(RESPONSE_WAIT, svc.settings)
    record = owned_response(svc, owner, rid)
    if stream:
        if not jobs.is_terminal(record["status"]):
            admission.hold(svc.held, owner)
        return sse_response(response_stream(svc, record, starting_after, False, False))
    record = wait_terminal(svc, record, admission.poll_wait(svc.held, owner, wait_s))
    headers = {http.PREFERENCE_APPLIED.name: f"wait={wait_s:g}"} if asked else {}
    return json_response(render(record), 200, headers)


@bp.post("/<rid>/cancel")
def cancel_response(rid: str) -> Response:
    """Cancel a queued or running response; an ended one is answered as it is."""
    svc = services()
    owner = authorize(svc)
    job_id = owned_response(svc, owner, rid)["id"]
    cancel = svc.store.cancel(job_id=job_id, lease_s=svc.settings.lease_s)
    log.info(
        "response %s cancel: %s",
        job_id,
        cancel.status,
        extra={"job_id": job_id, "key": owner, "event": "cancel"},
    )
    enqueue_detached(svc, cancel.detached)
    return json_response(render(load_owned(svc, job_id, owner)))


@bp.delete("/<rid>")
def delete_response(rid: str) -> Response:
    """Delete a response for good (cancelled first if it has not ended)."""
    svc = services()
    owner = authorize(svc)
    job_id = owned_response(svc, owner, rid)["id"]
    erased = erase(svc.store, job_id, svc.settings.lease_s)
    enqueue_detached(svc, erased.detached)
    if erased.status != "deleted":
        raise response_not_found()
    log.info(
        "response %s deleted", job_id, extra={"job_id": job_id, "key": owner, "event": "delete"}
    )
    deleted = ResponseDeleted(id=response_id(job_id), object="response.deleted", deleted=True)
    return json_response(structs.asdict(deleted))
