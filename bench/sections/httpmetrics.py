"""Issue 35: the CPU the HTTP metrics add to a web request, prometheus-flask-exporter as chatq
installs it against the hand-written hooks it replaced (bench/http_metrics_cost.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.lab import Lab
from bench.loadrun import ROOT
from bench.sections.common import JSON


def run(lab: Lab) -> JSON:
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
