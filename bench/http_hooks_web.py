"""`python -m bench.http_hooks_web`: chatq's web under gunicorn as `python -m web` runs it, its
app carrying the hand-written HTTP metric hooks it had before prometheus-flask-exporter
(bench/alt/http_hooks.py) in place of the exporter and today's request hook: the
alternative of the httpmetrics section's gunicorn measure."""

from __future__ import annotations

import os
from typing import Any

from chatq.config import settings as config
from web.__main__ import WebServer, own_metrics_dir
from web.server import gunicorn_errors


class HandWrittenWeb(WebServer):
    """chatq's gunicorn application, loading the app with the old hooks."""

    def load(self) -> Any:
        """Build the app inside the (monkey-patched) gunicorn worker, old hooks on."""
        from bench.alt import http_hooks
        from web import app as web_app
        from web import metrics

        # create_app installs both through these two names of web/metrics's package.
        metrics.install_request_log = http_hooks.install
        metrics.install = lambda app, metrics_dir: None
        return web_app.create_app()


def main() -> None:
    """Serve until stopped, as `python -m web` does (less the token encodings' preload)."""
    metrics_dir = own_metrics_dir()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    os.environ["CHATQ_METRICS_DIR"] = metrics_dir
    gunicorn_errors.install()
    HandWrittenWeb(config.load()).run()


if __name__ == "__main__":
    main()
