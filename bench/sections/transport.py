"""Issue 35: CPU per upstream call of the worker's requests.Session against the raw urllib3
pool it replaced, plain and streamed, from a client process to fakellm on 127.0.0.1."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from bench.lab import Lab
from bench.loadrun import ROOT
from bench.rows import Row, dig, missing, table
from bench.sections.common import JSON
from tests.procs import UPSTREAM_KEY

KINDS = ("plain", "streamed")
PATHS = ("urllib3", "session")
TARGET = "≤ 1.5x raw urllib3's CPU per call"


def run(lab: Lab) -> JSON:
    """Rounds of sequential calls on each path (bench/transport.py): the median of each path's
    CPU per call, and the median of the rounds' ratios (the paths share each round's load)."""
    spec = {
        "url": lab.fakellm(),
        "key": UPSTREAM_KEY,
        "calls": lab.sizes.transport_calls,
        "rounds": lab.sizes.transport_rounds,
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.transport"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=True,
    )
    out = json.loads(done.stdout)
    variants: JSON = {}
    for kind in KINDS:
        raws, sessions = (out["cpu_ms_per_call"][f"{path}_{kind}"] for path in PATHS)
        ratios = [b / a for a, b in zip(raws, sessions, strict=True)]
        variants[kind] = {
            "urllib3_cpu_ms_per_call": round(statistics.median(raws), 3),
            "session_cpu_ms_per_call": round(statistics.median(sessions), 3),
            "session_vs_urllib3": round(statistics.median(ratios), 2),
            "session_vs_urllib3_by_round": [round(r, 2) for r in ratios],
            "urllib3_tracked_objects": out["tracked_objects"][f"urllib3_{kind}"],
            "session_tracked_objects": out["tracked_objects"][f"session_{kind}"],
        }
    return {"calls_per_round": spec["calls"], "rounds": spec["rounds"], "variants": variants}


def judge(s: JSON) -> list[Row]:
    """The session path's CPU per call against raw urllib3's, plain and streamed."""
    variants = dig(s, "transport", "variants")
    if not variants:
        return [missing("upstream call: requests.Session vs raw urllib3", TARGET, 35)]
    return [
        Row(
            f"upstream call ({kind}): requests.Session vs raw urllib3, CPU",
            TARGET,
            f"{v['session_vs_urllib3']}x ({v['session_cpu_ms_per_call']} vs "
            f"{v['urllib3_cpu_ms_per_call']} ms)",
            v["session_vs_urllib3"] <= 1.5,
            35,
        )
        for kind, v in variants.items()
    ]


def results_table(s: JSON) -> str:
    """CPU ms and GC-tracked objects per call of each path."""
    rows = [
        [
            kind,
            v["urllib3_cpu_ms_per_call"],
            v["session_cpu_ms_per_call"],
            f"{v['session_vs_urllib3']}x",
            v["urllib3_tracked_objects"],
            v["session_tracked_objects"],
        ]
        for kind, v in (dig(s, "transport", "variants") or {}).items()
    ]
    return table(
        [
            "call",
            "raw urllib3, CPU ms/call",
            "requests.Session, CPU ms/call",
            "session / urllib3",
            "objects held open, urllib3",
            "objects held open, session",
        ],
        rows,
    )
