"""An OTLP/HTTP trace receiver for the tests: a loopback HTTP server in a thread that decodes
each `POST /v1/traces` (an `ExportTraceServiceRequest` in protobuf, as the SDK's exporter
sends it) and keeps its spans."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

# opentelemetry.proto.trace.v1.Span.SpanKind
KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True)
class Span:
    """One span received: ids in hex, as a traceparent writes them."""

    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...]
    events: tuple[str, ...]


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def decode(body: bytes) -> list[Span]:
    """The spans of one export request."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        service = str(_attributes(resource_spans.resource.attributes).get("service.name"))
        for scope_spans in resource_spans.scope_spans:
            spans += [
                Span(
                    service=service,
                    name=s.name,
                    kind=KINDS.get(s.kind, "unspecified"),
                    trace_id=s.trace_id.hex(),
                    span_id=s.span_id.hex(),
                    parent_id=s.parent_span_id.hex(),
                    attributes=_attributes(s.attributes),
                    links=tuple((link.trace_id.hex(), link.span_id.hex()) for link in s.links),
                    events=tuple(event.name for event in s.events),
                )
                for s in scope_spans.spans
            ]
    return spans


class OtlpReceiver:
    """See the module docstring; `url` is what OTEL_EXPORTER_OTLP_ENDPOINT names."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                spans = decode(body) if self.path == "/v1/traces" else []
                with receiver.lock:
                    receiver.spans += spans
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler

    def trace(self, trace_id: str) -> list[Span]:
        """The spans received so far of the trace `trace_id`."""
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
