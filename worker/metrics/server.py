"""The worker process's own /metrics (CHATQ_WORKER_METRICS_BIND): prometheus_client's WSGI
app on a thread, serving the series that name a tenant only to a scrape with
CHATQ_METRICS_TOKEN, as the web's /metrics does."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import REGISTRY, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from chatq.metrics import Scrape, Untenanted, metrics_refusal, scrape_access

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
REFUSAL = json.dumps(metrics_refusal().body()).encode()


class _Quiet(WSGIRequestHandler):
    """No line on stderr per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        """Say nothing."""


def metrics_app(token: str) -> App:
    """The WSGI app: every series with the token, the untenanted ones without credentials,
    401 with wrong ones."""
    full, untenanted = make_wsgi_app(REGISTRY), make_wsgi_app(Untenanted(REGISTRY))

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        access = scrape_access(environ.get("HTTP_AUTHORIZATION", ""), token)
        if access is Scrape.REFUSED:
            headers = [("Content-Type", "application/json"), ("WWW-Authenticate", "Bearer")]
            start_response("401 Unauthorized", headers)
            return [REFUSAL]
        served: App = full if access is Scrape.ALL else untenanted
        return served(environ, start_response)

    return app


def serve(host: str, port: int, token: str) -> None:
    """Serve the metrics on `host`:`port` from a daemon thread (OSError when it cannot)."""
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]

    class Server(ThreadingWSGIServer):
        address_family = family

    httpd = make_server(str(address[0]), port, metrics_app(token), Server, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, name="chatq-metrics", daemon=True).start()
