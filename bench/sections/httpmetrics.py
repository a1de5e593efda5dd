"""Issue 35: the CPU the HTTP metrics add to a web request, prometheus-flask-exporter as chatq
installs it against the hand-written hooks it replaced: through the WSGI entry in one process
(bench/http_metrics_cost.py), and in chatq's real gunicorn web, both ways side by side."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import requests

from bench.lab import Lab
from bench.loadrun import ROOT
from bench.procstat import cpu_seconds, serving_pid
from bench.sections.common import JSON
from scripts.localredis import free_port
from tests.procs import Proc, base_env, wait_until

# The exporter's way is chatq's own web; the hand-written way the same web with the old hooks.
WEBS = {"exporter": "web", "hand_written": "bench.http_hooks_web"}


def _wsgi(lab: Lab) -> JSON:
    """One process of its own, with an empty multiprocess folder as a gunicorn worker has."""
    folder = lab.tmp / "http-metrics"
    folder.mkdir()
    spec = {"requests": lab.sizes.http_metrics_requests, "rounds": lab.sizes.http_metrics_rounds}
    done = subprocess.run(
        [sys.executable, "-m", "bench.http_metrics_cost"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)},
        timeout=600,
        check=True,
    )
    return dict(json.loads(done.stdout))


def _start_web(lab: Lab, module: str) -> tuple[str, int]:
    """One gunicorn worker on the lab's Redis, no access log; (URL, the worker's pid)."""
    port = free_port()
    env = base_env(
        lab.redis().url,
        lab.fakellm(),
        CHATQ_WEB_WORKERS="1",
        CHATQ_ACCESS_LOG="0",
        CHATQ_LOG_LEVEL="WARNING",
        CHATQ_BIND=f"127.0.0.1:{port}",
    )
    proc = lab.track(Proc(f"httpmetrics-{module}", [module], env).start())
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: requests.get(url + "/healthz", timeout=1).ok, 30, module)
    return url, serving_pid(proc.pid)


def _cpu_us(session: requests.Session, url: str, pid: int, n: int) -> float:
    """The web worker's CPU µs per request over `n` sequential GET /healthz."""
    before = cpu_seconds(pid)
    for _ in range(n):
        session.get(url + "/healthz", timeout=10).raise_for_status()
    return 1e6 * (cpu_seconds(pid) - before) / n


def _gunicorn(lab: Lab) -> JSON:
    """Both webs up at once, GET /healthz over one keep-alive connection each, in turn per
    round; the median over rounds of the gunicorn worker's CPU (psutil) per request, and of
    the two ways' difference within a round."""
    n, rounds = lab.sizes.http_metrics_gunicorn_requests, lab.sizes.http_metrics_gunicorn_rounds
    webs = {way: _start_web(lab, module) for way, module in WEBS.items()}
    sessions = {way: requests.Session() for way in webs}
    for way, (url, pid) in webs.items():
        _cpu_us(sessions[way], url, pid, n // 10 + 1)  # warm-up
    per_round: dict[str, list[float]] = {way: [] for way in webs}
    for _ in range(rounds):
        for way, (url, pid) in webs.items():
            per_round[way].append(_cpu_us(sessions[way], url, pid, n))
    us = {way: round(statistics.median(v), 1) for way, v in per_round.items()}
    # A round's two figures share its moment's load: their difference is the steadier one.
    paired = [e - h for e, h in zip(per_round["exporter"], per_round["hand_written"], strict=True)]
    return {
        "requests": n,
        "rounds": rounds,
        "cpu_us_per_request": us,
        "rounds_us": {way: [round(x, 1) for x in v] for way, v in per_round.items()},
        "exporter_minus_hand_written_us": round(statistics.median(paired), 1),
    }


def run(lab: Lab) -> JSON:
    """The WSGI measure's figures, and the gunicorn measure under `gunicorn`."""
    return {**_wsgi(lab), "gunicorn": _gunicorn(lab)}
