"""W3C trace context carried with each job, and OpenTelemetry spans exported over OTLP/HTTP.

The trace context is always carried, whether spans are exported or not: a `/v1/*` request's
`traceparent` (or a fresh one) goes with its job, in the job record and its run message, and
every upstream attempt sends a `traceparent` of its own in that trace. Spans are made and
exported only when the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
`OTEL_EXPORTER_OTLP_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not `true`): `start` loads the
SDK then, and `exporting()` says so; with it off, chatq imports no OpenTelemetry module
(redis-py does, when installed, and records nothing unless configured).
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
from typing import Any

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# version-trace_id-parent_id-flags; a later version may append fields after a dash.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
# At most 32 list members of at most 256 characters each (W3C): longer is dropped, not cut.
TRACESTATE_MAX_CHARS = 512
SCOPE = "chatq"

_exporting = False


def enabled() -> bool:
    """Whether the environment asks for spans to be exported."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def start(service_name: str) -> None:
    """Export this process's spans in batches over OTLP/HTTP, if `enabled`; `service_name`
    unless OTEL_SERVICE_NAME names the service. Once per process."""
    global _exporting
    if _exporting or not enabled():
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or service_name
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)  # what is still batched is sent on a clean stop
    _exporting = True


def exporting() -> bool:
    """Whether `start` has set up the export: spans are made only then."""
    return _exporting


def parse(header: str | None) -> str:
    """A valid `traceparent` as version 00 writes it, else "" (W3C: an invalid one is ignored)."""
    if not header:
        return ""
    found = _TRACEPARENT.fullmatch(header.strip())
    if found is None:
        return ""
    version, trace_id, span_id, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest):
        return ""
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return ""
    return f"00-{trace_id}-{span_id}-{flags}"


def tracestate(header: str | None) -> str:
    """The `tracestate` to carry along with a valid traceparent: as sent, unless too long."""
    value = (header or "").strip()
    return value if len(value) <= TRACESTATE_MAX_CHARS else ""


def fresh() -> str:
    """The traceparent of a new trace, sampled: its id is there to be looked up."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def child(traceparent: str) -> str:
    """A traceparent in the same trace as `traceparent` with a span id of its own."""
    return f"{traceparent[:36]}{secrets.token_hex(8)}{traceparent[52:]}"


def trace_id(traceparent: str) -> str:
    """The trace id of a valid traceparent; "" for ""."""
    return traceparent[3:35]


def parent_context(traceparent: str, state: str = "") -> Any:
    """The OpenTelemetry context whose remote parent `traceparent` names (only when
    `exporting()`)."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": traceparent, "tracestate": state} if state else {}
    carrier.setdefault("traceparent", traceparent)
    return TraceContextTextMapPropagator().extract(carrier)


def traceparent_of(span: Any) -> str:
    """The traceparent naming `span` as the parent."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def tracer() -> Any:
    """chatq's tracer (only when `exporting`)."""
    from opentelemetry import trace

    return trace.get_tracer(SCOPE)


def record_fields(traceparent: str, state: str) -> dict[str, str]:
    """The job record's fields that carry its trace."""
    return (
        {"traceparent": traceparent, "tracestate": state} if state else {"traceparent": traceparent}
    )
