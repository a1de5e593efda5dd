"""`python -m web`: serve the API with gunicorn and gevent workers, set by CHATQ_*."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import time
from typing import Any

import gevent
from gunicorn.app.base import BaseApplication

from chatq import chat, config
from web import server

# gunicorn gives a stopping web this much more than CHATQ_GRACEFUL_TIMEOUT: held requests wait
# the whole grace, then still have time to send their answers from a loaded process.
ANSWER_MARGIN_S = 2


def _post_worker_init(worker: Any) -> None:
    """Time GC pauses, freeze what start-up built and collect on a clock; on SIGTERM, drain,
    then stop."""
    from chatq import metrics, runtime

    metrics.install()
    runtime.collect_on_a_clock()
    stop = signal.getsignal(signal.SIGTERM)

    def on_term(sig: int, frame: Any) -> None:
        # A handler runs inside whatever greenlet (or the hub) the signal interrupted, maybe
        # one holding the listener's lock: it only notes the time the grace counts from.
        gevent.spawn(_drain, worker, time.monotonic())
        if callable(stop):
            stop(sig, frame)

    signal.signal(signal.SIGTERM, on_term)


def _drain(worker: Any, since: float) -> None:
    from web.app import drain

    drain(worker.app.flask_app, since)


def _child_exit(_server: Any, worker: Any) -> None:
    """Drop a dead worker's live gauges from the multiprocess metrics."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


class WebServer(BaseApplication):  # type: ignore[misc]
    """gunicorn, configured from Settings instead of its command line."""

    def __init__(self, settings: config.Settings) -> None:
        self.settings = settings
        self.flask_app: Any = None
        super().__init__()

    def load_config(self) -> None:
        """Apply chatq's settings to gunicorn."""
        s = self.settings
        options: dict[str, Any] = {
            "bind": s.bind,
            "workers": s.web_workers,
            "worker_class": server.worker_class(s.header_timeout_s),
            # Parked long-polls count as connections: this caps them per process.
            "worker_connections": s.web_worker_connections,
            "backlog": 4096,
            "keepalive": s.keepalive_s,
            "graceful_timeout": s.graceful_timeout_s + ANSWER_MARGIN_S,
            "timeout": 60,
            "accesslog": None,
            "loglevel": s.log_level.lower(),
            "proc_name": "chatq-web",
            "control_socket_disable": True,
            "post_worker_init": _post_worker_init,
            "child_exit": _child_exit,
        }
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        """Import and build the app inside the (already monkey-patched) worker."""
        from web.app import create_app

        self.flask_app = create_app()
        # The app's method rather than the app: gunicorn calling the app object goes through
        # C (Flask.__call__), a frame every parked request keeps in its saved stack (0.75 KB).
        return self.flask_app.wsgi_app


def own_metrics_dir() -> str:
    """A temporary folder for the metrics files, removed when this (master) process exits."""
    path, master_pid = tempfile.mkdtemp(prefix="chatq-metrics-"), os.getpid()

    def remove() -> None:
        # gunicorn's workers leave through sys.exit too: only the master removes it.
        if os.getpid() == master_pid:
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(remove)
    return path


def main() -> None:
    """Run the web server until it is stopped."""
    settings = config.load()
    metrics_dir = settings.metrics_dir or own_metrics_dir()
    # prometheus_client reads this in every gunicorn worker: one set of files per process,
    # summed at scrape time.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    os.environ["CHATQ_METRICS_DIR"] = metrics_dir
    server.install()
    # Before gunicorn forks: every web process shares these pages (75 MiB for o200k) instead
    # of building its own; another model's encoding is built where it is first needed.
    chat.preload([settings.default_model])
    WebServer(config.load()).run()


if __name__ == "__main__":
    main()
