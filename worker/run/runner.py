"""Running one job: claim it, call the upstream with retries, record how it ended."""

from __future__ import annotations

import functools
import json
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from chatq import jobs
from chatq.chat import count_prompt_tokens
from chatq.config import Settings
from chatq.errors import INTERNAL_ERROR, UPSTREAM_TIMEOUT, JobError, failed_job_status
from worker import jobs as running
from worker import metrics, tracing
from worker.context import WorkerContext
from worker.jobs import Handle, persist
from worker.upstream import Attempt, Timeouts, attempt, endpoint_label

log = logging.getLogger(__name__)
BACKOFF_CAP_S = 20.0


@dataclass
class Run:
    """One execution of a job by this process."""

    handle: Handle
    request: dict[str, Any]
    created_at: float
    owner: str
    trace: tracing.RunTrace
    started: float = field(default_factory=time.monotonic)
    tried: set[str] = field(default_factory=set)
    counted: int | None = None

    def prompt_tokens(self) -> int:
        """The prompt's tokens: as counted at submit, else counted now, once per run."""
        if self.counted is None:
            self.counted = count_prompt_tokens(self.request)
        return self.counted


def run_job(ctx: WorkerContext, job_id: str) -> None:
    """Execute the job `job_id` unless another run has it or it has ended."""
    run_id = jobs.new_run_id()
    deadline = time.monotonic() + ctx.settings.job_timeout_s
    claim_started_ns = time.time_ns()
    claim = persist(
        lambda: ctx.store.claim(job_id=job_id, run_id=run_id, lease_s=ctx.settings.lease_s),
        until=deadline,
        what=f"claim of {job_id}",
    )
    if not claim.claimed:
        log.info("job %s not run: it is %s", job_id, claim.status)
        return
    metrics.QUEUE_WAIT.observe(max(0.0, time.time() - claim.created_at))
    run = Run(
        Handle(job_id, run_id, deadline),
        json.loads(claim.request or "{}"),
        claim.created_at,
        claim.owner or "-",
        tracing.begin(job_id, claim, claim_started_ns),
        counted=claim.prompt_tokens,
    )
    transition(run, "in_progress")
    ctx.registry.add(run.handle)
    metrics.RUNNING_JOBS.inc()
    try:
        _execute(ctx, run)
    finally:
        ctx.registry.remove(run.handle)
        metrics.RUNNING_JOBS.dec()
        busy_s = time.monotonic() - run.started
        metrics.JOB_DURATION.observe(busy_s)
        ctx.store.rates.ran(busy_s, claim.owner or "")
        tracing.ended(run.trace, run.handle.abort_reason or "ran")


def _upstream_body(request: dict[str, Any]) -> dict[str, Any]:
    return {**request, "stream": True, "stream_options": {"include_usage": True}}


@functools.cache
def _headers(api_key: str) -> Mapping[str, str]:
    """The upstream call's headers, the same for every call: built once."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _backoff_s(settings: Settings, attempt_no: int, result: Attempt) -> float:
    """Full-jitter exponential backoff, or the upstream's Retry-After within our cap."""
    if result.retry_after_s is not None:
        return min(result.retry_after_s, settings.retry_after_max_s)
    ceiling = min(BACKOFF_CAP_S, settings.retry_base_s * 2**attempt_no)
    return random.uniform(0, ceiling)


def _call(ctx: WorkerContext, run: Run, attempt_no: int) -> tuple[str, Attempt, str]:
    """Attempt `attempt_no` on the best endpoint: (endpoint, outcome, text not yet written)."""
    s, handle = ctx.settings, run.handle
    url = ctx.endpoints.choose(run.tried)
    run.tried.add(url)
    if not ctx.pacer.before(url, run.request, handle, run.prompt_tokens):
        return endpoint_label(url), _no_turn(), ""
    writer = ctx.flusher.writer(handle, s.flush_max_chars)
    timeouts = Timeouts(s.connect_timeout_s, s.first_byte_timeout_s, s.read_timeout_s)
    span, trace = tracing.attempt_started(
        run.trace, url, str(run.request.get("model", "")), attempt_no
    )
    started = time.monotonic()
    result = attempt(
        ctx.session,
        url + "/chat/completions",
        _upstream_body(run.request),
        _headers(s.upstream_api_key),
        timeouts,
        handle,
        writer,
        ctx.redact,
        trace,
    )
    tracing.attempt_ended(span, result)
    ctx.pacer.after(url, result)
    label = endpoint_label(url)
    metrics.UPSTREAM_DURATION.labels(label, result.label).observe(time.monotonic() - started)
    if result.ok and result.first_token_s is not None:
        ctx.endpoints.observe(url, result.first_token_s)
        metrics.TIME_TO_FIRST_TOKEN.observe(time.monotonic() - run.started)
    elif result.retryable and (result.status >= 500 or result.status == 0):
        ctx.endpoints.failed(url)
    return label, result, ctx.flusher.done(writer)


def _no_turn() -> Attempt:
    return Attempt(
        status=504,
        code=UPSTREAM_TIMEOUT,
        outcome="paced",
        message="The upstream's rate limits leave this job no turn before its deadline",
    )


def _execute(ctx: WorkerContext, run: Run) -> None:
    handle, s = run.handle, ctx.settings
    for attempt_no in range(s.max_attempts):
        if handle.abort_reason or not _begin(ctx, handle, attempt_no + 1):
            break
        label, result, tail = _call(ctx, run, attempt_no + 1)
        try:
            if handle.abort_reason:
                break
            if result.ok:
                if _complete(ctx, handle, result, tail):
                    transition(run, jobs.COMPLETED)
                return
        finally:
            # The end is recorded as soon as the answer's last event has come, not its body's
            # last bytes (worker/upstream/client.py).
            result.read_rest()
        delay_s = _backoff_s(s, attempt_no, result)
        last = attempt_no + 1 >= s.max_attempts or delay_s >= handle.remaining_s
        if not result.retryable or last:
            if _fail(ctx, handle, result):
                transition(run, jobs.FAILED, result.code)
            return
        _retrying(run, attempt_no + 1, label, result, delay_s)
        if not handle.sleep(delay_s):
            break
    _aborted(ctx, run)


def _retrying(run: Run, attempt_no: int, label: str, result: Attempt, delay_s: float) -> None:
    metrics.UPSTREAM_RETRIES.labels(label, result.label).inc()
    tracing.retrying(run.trace, result, delay_s)
    log.info(
        "job %s attempt %d failed (%s); retrying in %.2fs",
        run.handle.job_id,
        attempt_no,
        result.message,
        delay_s,
    )


def _begin(ctx: WorkerContext, handle: Handle, attempt: int) -> bool:
    """Count attempt number `attempt` of this run (the claim counted the first)."""
    if attempt == 1:
        return True
    return persist(
        lambda: ctx.store.begin_attempt(
            job_id=handle.job_id, run_id=handle.run_id, attempt=attempt
        ),
        until=handle.deadline,
        what=f"attempt of {handle.job_id}",
    )


def _finish(
    ctx: WorkerContext,
    handle: Handle,
    status: str,
    fields: dict[str, str],
    tail: str = "",
    finish_reason: str = "",
) -> bool:
    """End the job as `status`; False when this run no longer holds it."""
    return persist(
        lambda: ctx.store.finish(
            job_id=handle.job_id,
            run_id=handle.run_id,
            status=status,
            fields=fields,
            tail=tail,
            finish_reason=finish_reason,
        ),
        # A job past its deadline is still worth recording: give the store the lease's time.
        until=max(handle.deadline, time.monotonic()) + ctx.settings.lease_s,
        what=f"end of {handle.job_id}",
    )


def transition(run: Run, status: str, detail: str = "") -> None:
    """One log line per job transition, with the job id and the key name."""
    context = {"job_id": run.handle.job_id, "key": run.owner, "event": status}
    log.info(
        "job %s %s%s", run.handle.job_id, status, f" ({detail})" if detail else "", extra=context
    )


def _complete(ctx: WorkerContext, handle: Handle, result: Attempt, tail: str) -> bool:
    fields = {
        "result": json.dumps(result.completion, separators=(",", ":")),
        "finish_reason": result.finish_reason,
    }
    if not _finish(ctx, handle, jobs.COMPLETED, fields, tail, result.finish_reason):
        return False
    metrics.JOBS_FINISHED.labels(jobs.COMPLETED).inc()
    usage = result.completion.get("usage") or {}
    metrics.TOKENS.labels("in").inc(int(usage.get("prompt_tokens") or 0))
    metrics.TOKENS.labels("out").inc(int(usage.get("completion_tokens") or 0))
    return True


def _fail(ctx: WorkerContext, handle: Handle, result: Attempt) -> bool:
    status = failed_job_status(result.code, result.status)
    kind = "server_error" if result.code == INTERNAL_ERROR else "upstream_error"
    error = JobError(kind, result.code, result.message)
    fields = {"error": msgspec.json.encode(error).decode(), "error_status": str(status)}
    if not _finish(ctx, handle, jobs.FAILED, fields, "", "error"):
        return False
    metrics.JOBS_FINISHED.labels(jobs.FAILED).inc()
    return True


def _aborted(ctx: WorkerContext, run: Run) -> None:
    """Cancelled or lost jobs need nothing more; a job past its deadline fails."""
    handle = run.handle
    if handle.abort_reason in ("", running.TIMEOUT) and handle.remaining_s <= 0:
        timeout_s = ctx.settings.job_timeout_s
        result = Attempt(
            status=504,
            code="upstream_timeout",
            message=f"The job did not finish within {timeout_s:g} s",
        )
        if _fail(ctx, handle, result):
            transition(run, jobs.FAILED, result.code)
    else:
        transition(run, "stopped", handle.abort_reason or "no longer ours")
