"""The OpenAI-compatible front door: /v1/chat/completions and /v1/models."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import requests
from flask import Blueprint, Response

from chatq import jobs
from chatq.chat import chat_request, fit_context
from chatq.errors import ApiError
from chatq.jobs import Waiter
from web import admission, http
from web.chat.chunks import ChunkMaker, sse, tool_call_deltas
from web.context import Services, authorize, services
from web.http import CACHE_CONTROL, IDEMPOTENCY_KEY, failed_job_error, job_response, json_response
from web.jobs import (
    STREAM_ENDING_ERRORS,
    before_park,
    follow,
    job_id_for,
    load_owned,
    sse_response,
    submit,
    wait_terminal,
    watching,
)

log = logging.getLogger(__name__)
bp = Blueprint("openai", __name__, url_prefix="/v1")
_models_session = requests.Session()


@bp.post("/chat/completions")
def chat_completions() -> Response:
    """Run a chat completion as an interactive job and answer as the upstream would."""
    svc = services()
    owner = authorize(svc)
    body = http.json_body()
    request = chat_request(body, svc.settings)
    overflow = http.overflow_policy(svc.settings)
    fitted = fit_context(request, svc.settings.max_context_tokens, overflow)
    request = fitted.request
    stream = request.pop("stream", None) is True
    options = request.pop("stream_options", None) or {}
    if admission.holds_open(stream, svc.settings.max_wait_s):
        admission.hold(svc.held, owner)
    cache_control = http.text(CACHE_CONTROL) or ""
    job_id = job_id_for(svc, owner, request, cache_control)
    with watching(svc, job_id, 0.0 if stream else 1.0) as waiter:
        record = before_park(
            not stream,
            submit,
            svc,
            owner,
            request,
            "interactive",
            http.text(IDEMPOTENCY_KEY),
            cache_control,
            job_id=job_id,
            prompt_tokens=fitted.prompt_tokens,
        )
        if not stream:
            return _hold(svc, record, waiter)
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    response = sse_response(_stream(svc, record, include_usage))
    response.headers[http.JOB_ID_HEADER.name] = record["id"]
    return response


def _hold(svc: Services, record: dict[str, str], waiter: Waiter | None = None) -> Response:
    """Answer once the job ends; 202 only to a client that asked with Prefer."""
    asked, respond_async = http.prefer_wait(), http.prefers_async()
    if asked is not None or respond_async:
        wait_s = min(asked or 0.0, svc.settings.max_wait_s)
        record = wait_terminal(svc, record, wait_s, waiter=waiter)
        if not jobs.is_terminal(record["status"]):
            return job_response(record, None if asked is None else wait_s, respond_async)
    else:
        hold_s = svc.settings.job_timeout_s + svc.settings.lease_s
        record = wait_terminal(svc, record, hold_s, through_drain=True, waiter=waiter)
    # The job exists and chatq did its own retries: an SDK resending would start another.
    headers = {http.JOB_ID_HEADER.name: record["id"], http.SHOULD_RETRY.name: "false"}
    if record["status"] == jobs.COMPLETED:
        return json_response(jobs.public_view(record)["result"], 200, headers)
    error = (
        failed_job_error(record)
        if jobs.is_terminal(record["status"])
        else _unfinished(svc, record["id"])
    )
    return json_response(error.body(), error.status, headers)


def _unfinished(svc: Services, job_id: str) -> ApiError:
    """The answer for a held job that has not ended: the web is stopping, or time ran out."""
    if svc.listener.draining:
        return ApiError(
            503,
            "server_shutting_down",
            f"This server is restarting; job {job_id} goes on: fetch its answer at "
            f"/v1/jobs/{job_id}/result.",
            type_="server_error",
        )
    return ApiError(504, "job_timeout", f"Job {job_id} did not end in time.", type_="server_error")


def _stream(svc: Services, record: dict[str, str], include_usage: bool) -> Iterator[str]:
    """chat.completion.chunk events fed by the job's events, then `data: [DONE]`."""
    job_id = record["id"]
    maker = ChunkMaker(job_id, float(record["created_at"]), record["model"])
    yield sse(maker.chunk({"role": "assistant", "content": ""}))
    sent_text = False
    try:
        for events in follow(svc, job_id, "0", through_drain=True):
            for event in events:
                if event.type == "delta":
                    sent_text = True
                    yield sse(maker.chunk({"content": event.value}))
                elif event.type == "reset" and sent_text:
                    yield sse(_error_body(502, "stream_reset", "The answer restarted upstream."))
                    return
        yield from _stream_end(svc, record, maker, include_usage)
    except GeneratorExit:
        # The client went away mid-stream: the job carries on unless configured otherwise.
        if svc.settings.cancel_on_disconnect:
            svc.store.cancel(job_id=job_id, lease_s=svc.settings.lease_s)
        raise
    except STREAM_ENDING_ERRORS as exc:
        log.warning("stream of %s ended early: %s", job_id, type(exc).__name__)
        yield sse(_error_body(503, "backend_unavailable", "The stream was interrupted."))


def _stream_end(
    svc: Services, record: dict[str, str], maker: ChunkMaker, include_usage: bool
) -> Iterator[str]:
    final = load_owned(svc, record["id"], record["owner"])
    if final["status"] != jobs.COMPLETED:
        terminal = jobs.is_terminal(final["status"])
        error = failed_job_error(final) if terminal else _unfinished(svc, record["id"])
        yield sse(error.body())
        return
    result = jobs.public_view(final)["result"] or {}
    for delta in tool_call_deltas(result):
        yield sse(maker.chunk(delta))
    finish = (result.get("choices") or [{}])[0].get("finish_reason") or "stop"
    yield sse(maker.chunk({}, finish))
    if include_usage:
        yield sse(maker.usage(result.get("usage")))
    yield sse("[DONE]")


def _error_body(status: int, code: str, message: str) -> dict[str, Any]:
    return ApiError(status, code, message, type_="server_error").body()


@bp.get("/models")
def models() -> Response:
    """The upstream's model list, passed through."""
    svc = services()
    authorize(svc)
    headers = {}
    if svc.settings.upstream_api_key:
        headers["Authorization"] = f"Bearer {svc.settings.upstream_api_key}"
    url = svc.settings.upstream_urls[0] + "/models"
    try:
        verify = svc.settings.upstream_ca_file or True
        upstream = _models_session.get(url, headers=headers, timeout=10, verify=verify)
        body = upstream.json()
    except (requests.RequestException, ValueError) as exc:
        raise ApiError(
            502, "upstream_error", "The upstream model list is unavailable.", type_="upstream_error"
        ) from exc
    if upstream.status_code != 200 or not isinstance(body, dict):
        raise ApiError(
            502,
            "upstream_error",
            f"The upstream answered {upstream.status_code} for its model list.",
            type_="upstream_error",
        )
    return json_response(body)
