"""Each `/v1/*` request's trace: the client's `traceparent` (or a fresh trace), its server span when
spans are exported (chatq/tracing/context.py), and its trace id in the `Chatq-Trace-Id` header."""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, g, has_request_context, request

from chatq import tracing
from web import http
from web.http import TRACE_ID_HEADER, TRACEPARENT, TRACESTATE

_API_PREFIX = "/v1/"


def install(app: Flask) -> None:
    """Trace every `/v1/*` request of `app`."""
    app.before_request(_begin)
    app.after_request(_answer)
    app.teardown_request(_end)


def _begin() -> None:
    if not request.path.startswith(_API_PREFIX):
        return
    incoming = tracing.parse(http.text(TRACEPARENT))
    state = tracing.tracestate(http.text(TRACESTATE)) if incoming else ""
    if not tracing.exporting():
        g.chatq_trace = (incoming or tracing.fresh(), state)
        return
    from opentelemetry.trace import SpanKind

    rule = request.url_rule.rule if request.url_rule else request.path
    span = tracing.tracer().start_span(
        f"{request.method} {rule}",
        context=tracing.parent_context(incoming, state) if incoming else None,
        kind=SpanKind.SERVER,
        attributes={"http.request.method": request.method, "http.route": rule},
    )
    g.chatq_span = span
    g.chatq_trace = (tracing.traceparent_of(span), state)


def _answer(response: Response) -> Response:
    trace = g.get("chatq_trace")
    if trace is not None:
        response.headers[TRACE_ID_HEADER.name] = tracing.trace_id(trace[0])
    span = g.get("chatq_span")
    if span is not None:
        span.set_attribute("http.response.status_code", response.status_code)
    return response


def _end(_exc: BaseException | None) -> None:
    span = g.pop("chatq_span", None)
    if span is not None:
        span.end()


def job_fields() -> dict[str, str]:
    """The record fields that carry the current request's trace to the job it creates."""
    trace = g.get("chatq_trace") if has_request_context() else None
    if trace is None:
        return tracing.record_fields(tracing.fresh(), "")
    return tracing.record_fields(*trace)


def current_span() -> Any:
    """The current request's server span, or None (spans off, or no request)."""
    return g.get("chatq_span") if has_request_context() else None


class LongPoll:
    """A parked request's wait: its wakes, noted on its span, which `end` ends. Spans off,
    every request shares one that notes nothing (a parked request keeps no object of it)."""

    __slots__ = ("span", "wakes")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.wakes = 0

    def woke(self) -> None:
        """A notification woke the request."""
        if self.span is not None:
            self.wakes += 1
            self.span.add_event("chatq.wake")

    def end(self) -> None:
        """The wait is over."""
        if self.span is not None:
            self.span.set_attribute("chatq.wakes", self.wakes)
            self.span.end()


_UNTRACED = LongPoll(None)


def long_poll(job_id: str) -> LongPoll:
    """The span of a request parked on `job_id`, within its request's span; end it."""
    parent = current_span()
    if parent is None:
        return _UNTRACED
    from opentelemetry.trace import set_span_in_context

    span = tracing.tracer().start_span(
        "chatq long-poll", context=set_span_in_context(parent), attributes={"chatq.job.id": job_id}
    )
    return LongPoll(span)
