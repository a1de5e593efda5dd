"""`python -m bench.http_metrics_cost`: the CPU the HTTP metrics add to a request of the web,
prometheus-flask-exporter (as chatq installs it) against the hand-written hooks it replaced.

Reads {"requests": N, "rounds": R} on stdin; prints one JSON line. Run it with
PROMETHEUS_MULTIPROC_DIR set to an empty folder, as `python -m web` sets it for its gunicorn
workers: every observation then writes to the multiprocess files, as in production. Four
Flask apps with one route like chatq's (`GET /v1/jobs/<job_id>`, 100 job ids in turn), each
called N times through its WSGI entry (what gunicorn calls):

- `bare`: no hooks;
- `request_hook`: chatq's request hook without metrics (the in-flight gauge, the GC-pause
  flush, the log line), which both ways keep;
- `hand_written`: the hook as it was, the histogram and counter observed in it
  (bench/alt/http_hooks.py);
- `exporter`: chatq's request hook plus `web.metrics.http_requests.install` (multiprocess mode).

The log line is off in all (CHATQ_ACCESS_LOG=0: its record is dropped by level alike). Each
round runs every app once, interleaved, so that a busy neighbour on the shared machine slows
all alike; a figure is the median over rounds of process CPU time (time.process_time) / N.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, Response
from werkzeug.test import EnvironBuilder

from bench.alt import http_hooks
from web.metrics import http_requests as http_metrics
from web.metrics import request_hooks as observability

JOB_IDS = [f"job_{i:032x}" for i in range(100)]
BODY = b'{"id": "job", "status": "queued"}'
WARM_UP = 500


def _app(name: str) -> Flask:
    app = Flask(f"bench-{name}")

    @app.get("/v1/jobs/<job_id>")
    def job(job_id: str) -> Response:
        return Response(BODY, content_type="application/json")

    if name == "request_hook":
        observability.install_request_log(app, access_log=False)
    elif name == "hand_written":
        http_hooks.install(app, access_log=False)
    elif name == "exporter":
        observability.install_request_log(app, access_log=False)
        http_metrics.install(app, os.environ["PROMETHEUS_MULTIPROC_DIR"])
    return app


def _start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
    return None


def _calls(app: Flask, environs: list[dict[str, Any]], n: int) -> float:
    """CPU seconds of `n` requests through the app's WSGI entry, bodies read and closed."""
    wsgi: Callable[..., Iterable[bytes]] = app.wsgi_app
    gc.collect()
    t0 = time.process_time()
    for i in range(n):
        body = wsgi(dict(environs[i % len(environs)]), _start_response)
        for _chunk in body:
            pass
        getattr(body, "close", lambda: None)()
    return time.process_time() - t0


def measure(n: int, rounds: int) -> dict[str, Any]:
    """Per-request CPU (µs) of each app, and what the metrics add to the request hook."""
    names = ("bare", "request_hook", "hand_written", "exporter")
    apps = {name: _app(name) for name in names}
    environs = [EnvironBuilder(path=f"/v1/jobs/{j}").get_environ() for j in JOB_IDS]
    for app in apps.values():
        _calls(app, environs, WARM_UP)
    per_round: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name, app in apps.items():
            per_round[name].append(1e6 * _calls(app, environs, n) / n)
    us = {name: round(statistics.median(v), 2) for name, v in per_round.items()}
    added = {name: round(us[name] - us["request_hook"], 2) for name in ("hand_written", "exporter")}
    return {
        "requests": n,
        "rounds": rounds,
        "cpu_us_per_request": us,
        "rounds_us": {name: [round(x, 2) for x in v] for name, v in per_round.items()},
        "metrics_cpu_us_per_request": added,
        "exporter_over_hand_written": round(added["exporter"] / added["hand_written"], 2)
        if added["hand_written"] > 0
        else None,
    }


def main() -> None:
    """Read the spec, measure, print the JSON line."""
    spec = json.loads(sys.stdin.read())
    print(json.dumps(measure(int(spec["requests"]), int(spec["rounds"]))))


if __name__ == "__main__":
    main()
