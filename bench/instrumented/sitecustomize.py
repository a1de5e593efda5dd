"""The maintained OpenTelemetry instrumentors in chatq's processes, for `python -m bench.tracecost
--instrumented` only (which puts this folder on the children's PYTHONPATH): not part of chatq,
and its packages are not in its requirements.

Nothing is imported here but chatq.tracing, whose `start` it wraps (the package's name, which
its callers look up): gunicorn's gevent workers monkey-patch the standard library before the
app is built, so Flask, requests, urllib3 and redis are instrumented then (the web: in
`create_app`; the worker: in `worker_init`), not at interpreter start. Spans go to
`CHATQ_BENCH_OTLP_URL`, chatq's own on or off alike.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# site runs this before `python -m` puts the working folder on the path: the repository's root.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chatq import tracing

_chatq_start = tracing.start


def _provider() -> None:
    """This process's exporter, unless chatq's own start made one."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    endpoint = os.environ["CHATQ_BENCH_OTLP_URL"].rstrip("/") + "/v1/traces"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "bench"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    import atexit

    atexit.register(provider.shutdown)


def _instrument_flask() -> None:
    from opentelemetry.instrumentation.flask import FlaskInstrumentor

    from web import tracing as web_tracing

    install = web_tracing.install

    def install_both(app: Any) -> None:
        FlaskInstrumentor().instrument_app(app)
        install(app)

    web_tracing.install = install_both


def start(service_name: str) -> None:
    """chatq's own start, then the maintained instrumentors of this process."""
    _chatq_start(service_name)
    if not tracing.exporting():
        _provider()
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.instrumentation.requests import RequestsInstrumentor
    from opentelemetry.instrumentation.urllib3 import URLLib3Instrumentor

    RedisInstrumentor().instrument()
    RequestsInstrumentor().instrument()
    URLLib3Instrumentor().instrument()
    if service_name == "chatq-web":
        _instrument_flask()
    else:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor

        CeleryInstrumentor().instrument()


if os.environ.get("CHATQ_BENCH_OTLP_URL"):
    tracing.start = start
