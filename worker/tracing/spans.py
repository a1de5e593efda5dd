"""A job's run in its trace (chatq/tracing/context.py): the `traceparent` each upstream attempt
sends, and, when spans are exported, the spans of the run: its time queued, its processing (a
consumer span, as the OTel messaging conventions have it) and each upstream attempt (a client span
with the GenAI conventions' `gen_ai.*` attributes)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chatq import tracing
from chatq.jobs import Claim
from worker.upstream import Attempt

_NS_PER_S = 1_000_000_000


@dataclass
class RunTrace:
    """The trace one run of a job is in; `span` its processing span, when spans are made."""

    traceparent: str
    state: str = ""
    span: Any = None


def begin(job_id: str, claim: Claim, claim_started_ns: int) -> RunTrace:
    """The claimed job's run, in the trace its record carries (a job from before tracing was
    carried gets a trace of its own); with spans on, its time queued (until the claim began,
    at `claim_started_ns`, Unix ns) and its claim recorded."""
    traceparent = tracing.parse(claim.traceparent) or tracing.fresh()
    state = claim.tracestate if claim.traceparent else ""
    if not tracing.exporting():
        return RunTrace(traceparent, state)
    from opentelemetry.trace import SpanKind

    parent, tracer = tracing.parent_context(traceparent, state), tracing.tracer()
    job = {"chatq.job.id": job_id, "messaging.system": "chatq"}
    queued = tracer.start_span(
        "chatq queued",
        context=parent,
        start_time=int(claim.created_at * _NS_PER_S),
        attributes=job,
    )
    queued.end(end_time=claim_started_ns)
    tracer.start_span(
        "chatq claim", context=parent, start_time=claim_started_ns, attributes=job
    ).end()
    span = tracer.start_span(
        "process chatq.run_job",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes={**job, "messaging.operation.type": "process"},
        links=_links(claim.trace_link),
    )
    return RunTrace(traceparent, state, span)


def _links(traceparent: str) -> list[Any]:
    """A link to the span `traceparent` names (a batch line's batch), if any."""
    if not tracing.parse(traceparent):
        return []
    from opentelemetry.trace import Link, get_current_span

    return [Link(get_current_span(tracing.parent_context(traceparent)).get_span_context())]


def attempt_started(
    run: RunTrace, url: str, model: str, attempt_no: int
) -> tuple[Any, dict[str, str]]:
    """The span of one upstream attempt (None with spans off) and the trace headers it sends."""
    if run.span is None:
        return None, _headers(tracing.child(run.traceparent), run.state)
    from opentelemetry.trace import SpanKind, set_span_in_context

    host = urlsplit(url)
    span = tracing.tracer().start_span(
        f"chat {model}",
        context=set_span_in_context(run.span),
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "server.address": host.hostname or "",
            "server.port": host.port or (443 if host.scheme == "https" else 80),
            "chatq.attempt": attempt_no,
        },
    )
    return span, _headers(tracing.traceparent_of(span), run.state)


def _headers(traceparent: str, state: str) -> dict[str, str]:
    return (
        {"traceparent": traceparent, "tracestate": state} if state else {"traceparent": traceparent}
    )


def attempt_ended(span: Any, result: Attempt) -> None:
    """End an attempt's span with how it went: status, tokens, the error that ended it."""
    if span is None:
        return
    if result.status:
        span.set_attribute("http.response.status_code", result.status)
    usage = result.completion.get("usage") or {}
    if usage:
        span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("prompt_tokens") or 0))
        span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("completion_tokens") or 0))
    if result.completion.get("model"):
        span.set_attribute("gen_ai.response.model", str(result.completion["model"]))
    if result.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [result.finish_reason])
    if not result.ok:
        from opentelemetry.trace import StatusCode

        span.set_attribute("error.type", result.label)
        span.set_status(StatusCode.ERROR, result.message[:200])
    span.end()


def retrying(run: RunTrace, result: Attempt, delay_s: float) -> None:
    """Note on the run's span why an attempt is tried again, and after how long."""
    if run.span is not None:
        run.span.add_event(
            "chatq.retry",
            {"chatq.retry.reason": result.label, "chatq.retry.delay_s": delay_s},
        )


def ended(run: RunTrace, outcome: str) -> None:
    """End the run's span, `outcome` being how the run left the job."""
    if run.span is not None:
        run.span.set_attribute("chatq.job.outcome", outcome)
        run.span.end(end_time=time.time_ns())


def webhook_sent(url: str, event: str, sent: Any, started_ns: int) -> None:
    """The client span of one webhook delivery attempt, started at `started_ns` (Unix ns),
    in a trace of its own; `sent` is how it went (worker/webhooks/send.py's Sent)."""
    if not tracing.exporting():
        return
    from opentelemetry.trace import SpanKind, StatusCode

    host = urlsplit(url)
    span = tracing.tracer().start_span(
        "POST webhook",
        kind=SpanKind.CLIENT,
        start_time=started_ns,
        attributes={
            "http.request.method": "POST",
            "server.address": host.hostname or "",
            "chatq.webhook.event": event,
            "chatq.webhook.outcome": sent.outcome,
        },
    )
    if sent.status_code is not None:
        span.set_attribute("http.response.status_code", sent.status_code)
    if sent.outcome != "delivered":
        span.set_status(StatusCode.ERROR, sent.reason or sent.outcome)
    span.end()
