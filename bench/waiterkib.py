"""`python -m bench.waiterkib PORT`: chatq's web app in one gevent process, under tracemalloc.

The app is built by `web.app.create_app` (CHATQ_* from the environment) and served by
gevent's WSGI server, the one gunicorn's gevent worker runs, behind a wrapper that answers
two paths of its own before the app sees them: `POST /__bench__/trace/start` (collect, then
start tracing) and `GET /__bench__/trace` (collect, then the bytes traced since the start and
the allocation sites that grew most). The web itself has no bench mode: this process is the
bench's own.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import gc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import sysconfig  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Callable, Iterable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from gevent.pywsgi import WSGIServer  # noqa: E402

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
            return filename[len(prefix):]
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
    return {"traced_bytes": current - _start_bytes[0], "peak_bytes": peak,
            "top": [{"where": f"{_short(s.traceback[0].filename)}:{s.traceback[0].lineno}",
                     "bytes": s.size_diff, "blocks": s.count_diff} for s in grown]}


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
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(data)))])
        return [data]
    return serve


def main() -> None:
    """Serve on 127.0.0.1:PORT until stopped."""
    from web.app import create_app

    port = int(sys.argv[1])
    server = WSGIServer(("127.0.0.1", port), wrap(create_app()), log=None, backlog=4096)
    server.serve_forever()


if __name__ == "__main__":
    main()
