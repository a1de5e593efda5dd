"""Running one job: claim it, call the upstream with retries, record how it ended."""

from __future__ import annotations

import json
import logging
import random
import time
from typing import Any

from chatq import jobs
from worker import running
from worker.context import WorkerContext
from worker.running import DeltaWriter, Handle
from worker.upstream import Attempt, attempt

log = logging.getLogger(__name__)
BACKOFF_CAP_S = 20.0


def run_job(ctx: WorkerContext, job_id: str) -> None:
    """Execute the job `job_id` unless another run has it or it has ended."""
    run_id = jobs.new_run_id()
    claimed = ctx.store.claim(job_id, run_id, ctx.settings.lease_s)
    if claimed != "claimed":
        log.info("job %s not run: it is %s", job_id, claimed)
        return
    record = ctx.store.get(job_id) or {}
    request = json.loads(record.get("request") or "{}")
    deadline = time.monotonic() + ctx.settings.job_timeout_s
    handle = Handle(job_id, run_id, deadline)
    ctx.registry.add(handle)
    try:
        _execute(ctx, handle, request)
    finally:
        ctx.registry.remove(handle)


def _upstream_body(request: dict[str, Any]) -> dict[str, Any]:
    return {**request, "stream": True, "stream_options": {"include_usage": True}}


def _headers(ctx: WorkerContext) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if ctx.settings.upstream_api_key:
        headers["Authorization"] = f"Bearer {ctx.settings.upstream_api_key}"
    return headers


def _backoff_s(ctx: WorkerContext, attempt_no: int, result: Attempt) -> float:
    """Full-jitter exponential backoff, or the upstream's Retry-After within our cap."""
    if result.retry_after_s is not None:
        return min(result.retry_after_s, ctx.settings.retry_after_max_s)
    ceiling = min(BACKOFF_CAP_S, ctx.settings.retry_base_s * 2**attempt_no)
    return random.uniform(0, ceiling)


def _execute(ctx: WorkerContext, handle: Handle, request: dict[str, Any]) -> None:
    s = ctx.settings
    url = s.upstream_urls[0] + "/chat/completions"
    body, headers = _upstream_body(request), _headers(ctx)
    for attempt_no in range(s.max_attempts):
        if handle.abort_reason or not ctx.store.begin_attempt(handle.job_id, handle.run_id):
            break
        writer = DeltaWriter(ctx.store, handle, s.flush_interval_s, s.flush_max_chars)
        read_s = min(s.read_timeout_s, max(0.01, handle.remaining_s))
        result = attempt(ctx.session, url, headers, body, (s.connect_timeout_s, read_s),
                         handle, writer, ctx.redact)
        if handle.abort_reason:
            break
        if result.ok:
            _complete(ctx, handle, result, writer.take())
            return
        delay_s = _backoff_s(ctx, attempt_no, result)
        last = attempt_no + 1 >= s.max_attempts or delay_s >= handle.remaining_s
        if not result.retryable or last:
            _fail(ctx, handle, result)
            return
        log.info("job %s attempt %d failed (%s); retrying in %.2fs",
                 handle.job_id, attempt_no + 1, result.message, delay_s)
        if not handle.sleep(delay_s):
            break
    _aborted(ctx, handle)


def _complete(ctx: WorkerContext, handle: Handle, result: Attempt, tail: str) -> None:
    fields = {"result": json.dumps(result.completion, separators=(",", ":"))}
    ctx.store.finish(handle.job_id, handle.run_id, jobs.COMPLETED, fields, tail,
                     result.finish_reason)


def _fail(ctx: WorkerContext, handle: Handle, result: Attempt) -> None:
    status = 502 if result.status in (401, 403) or result.status >= 500 else result.status
    if result.code == "upstream_timeout":
        status = 504
    error = {"type": "upstream_error", "code": result.code, "message": result.message}
    fields = {"error": json.dumps(error), "error_status": str(status or 502)}
    ctx.store.finish(handle.job_id, handle.run_id, jobs.FAILED, fields, "", "error")


def _aborted(ctx: WorkerContext, handle: Handle) -> None:
    """Cancelled or lost jobs need nothing more; a job past its deadline fails."""
    if handle.abort_reason in ("", running.TIMEOUT) and handle.remaining_s <= 0:
        timeout_s = ctx.settings.job_timeout_s
        result = Attempt(status=504, code="upstream_timeout",
                         message=f"The job did not finish within {timeout_s:g} s")
        _fail(ctx, handle, result)
