"""`python -m bench.waiterkib`: chatq's web, as `python -m web` serves it, under tracemalloc.

gunicorn with chatq's own configuration (`web.__main__.WebServer`: one gevent worker, the
same options), but the app it loads is `web.app.create_app()` behind a wrapper that answers
two paths of its own before the app sees them: `POST /__bench__/trace/start` (collect, then
start tracing) and `GET /__bench__/trace` (collect, then the bytes allocated since the start
and still held, and the sites that grew most). The web itself has no bench mode: this
process is the bench's own. CHATQ_BIND says where it listens.
"""

from __future__ import annotations

import gc
import json
import os
import sysconfig
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from chatq.config import settings as config
from web.__main__ import WebServer, own_metrics_dir
from web.server import gunicorn_errors

ROOT = Path(__file__).resolve().parents[1]
TOP_SITES = 12
_base: list[tracemalloc.Snapshot] = []
_start_bytes: list[int] = []
Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _short(filename: str) -> str:
    """A source path without this machine's folders: relative to the repo or site-packages."""
    paths = sysconfig.get_paths()
    for prefix in (paths["purelib"] + "/", paths["stdlib"] + "/", str(ROOT) + "/"):
        if filename.startswith(prefix):
            return filename[len(prefix) :]
    return Path(filename).name


def start() -> dict[str, Any]:
    """Collect, then trace every allocation from now on."""
    gc.collect()
    tracemalloc.start(1)
    _base[:] = [tracemalloc.take_snapshot()]
    _start_bytes[:] = [tracemalloc.get_traced_memory()[0]]
    return {"traced_bytes": _start_bytes[0]}


def read() -> dict[str, Any]:
    """Collect, then what is held now that was allocated since `start`, and where."""
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    grown = tracemalloc.take_snapshot().compare_to(_base[0], "lineno")[:TOP_SITES]
    return {
        "traced_bytes": current - _start_bytes[0],
        "peak_bytes": peak,
        "top": [
            {
                "where": f"{_short(s.traceback[0].filename)}:{s.traceback[0].lineno}",
                "bytes": s.size_diff,
                "blocks": s.count_diff,
            }
            for s in grown
        ],
    }


def wrap(app: Wsgi) -> Wsgi:
    """The app, with the two tracing paths answered before it."""

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/__bench__/trace/start":
            answer = start()
        elif path == "/__bench__/trace":
            answer = read()
        else:
            return app(environ, start_response)
        data = json.dumps(answer).encode()
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return [data]

    return serve


class TracedWeb(WebServer):
    """chatq's gunicorn application, loading the wrapped app."""

    def load(self) -> Any:
        """Build the app inside the (monkey-patched) gunicorn worker, wrapped."""
        from web.app import create_app

        self.flask_app = create_app()
        return wrap(self.flask_app.wsgi_app)


def main() -> None:
    """Serve until stopped, as `python -m web` does (less the token encodings' preload)."""
    metrics_dir = own_metrics_dir()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    os.environ["CHATQ_METRICS_DIR"] = metrics_dir
    gunicorn_errors.install()
    TracedWeb(config.load()).run()


if __name__ == "__main__":
    main()
