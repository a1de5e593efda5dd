"""W3C trace context, carried with every job; OpenTelemetry's SDK when an OTLP endpoint is set."""

from chatq.tracing.context import (
    child,
    exporting,
    fresh,
    parent_context,
    parse,
    record_fields,
    start,
    trace_id,
    traceparent_of,
    tracer,
    tracestate,
)

__all__ = [
    "child",
    "exporting",
    "fresh",
    "parent_context",
    "parse",
    "record_fields",
    "start",
    "trace_id",
    "traceparent_of",
    "tracer",
    "tracestate",
]
