"""Issue 4: upstream calls with the worker's pooled session against a fresh connection each,
over plain HTTP and over TLS (a local CA made by trustme)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import requests
import trustme

from bench.lab import Lab
from bench.loadrun import ROOT
from bench.sections.common import JSON
from bench.stats import summary_ms
from scripts.localredis import free_port
from tests.procs import UPSTREAM_KEY, Proc, wait_until


def _start_tls(lab: Lab) -> tuple[str, str]:
    """fakellm over HTTPS with a certificate for 127.0.0.1; (base URL, CA file)."""
    ca = trustme.CA()
    cert, ca_file = lab.tmp / "server.pem", lab.tmp / "ca.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(cert))
    ca.cert_pem.write_to_path(str(ca_file))
    port = free_port()
    args = ["bench.tlsllm", "--port", str(port), "--cert", str(cert), "--api-key", UPSTREAM_KEY]
    lab.track(Proc("tlsllm", args, dict(os.environ)).start())
    root = f"https://127.0.0.1:{port}"
    wait_until(
        lambda: requests.get(root + "/stats", verify=str(ca_file), timeout=1).ok, 15, "tls fakellm"
    )
    return root, str(ca_file)


def _calls(spec: JSON) -> JSON:
    done = subprocess.run(
        [sys.executable, "-m", "bench.calls"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=True,
    )
    return dict(json.loads(done.stdout))


def _variant(root: str, ca: str | None, kind: str, calls: int, threads: int) -> JSON:
    verify: str | bool = ca or True
    requests.post(root + "/stats/reset", verify=verify, timeout=5)
    spec = {
        "url": root + "/v1",
        "key": UPSTREAM_KEY,
        "kind": kind,
        "calls": calls,
        "threads": threads,
        "ca": ca,
    }
    out = _calls(spec)
    stats = requests.get(root + "/stats", verify=verify, timeout=5).json()
    return {
        "kind": kind,
        "tls": ca is not None,
        "calls": calls + 1,
        "threads": threads,
        "latency": summary_ms(out["latencies"]),
        "cpu_ms_per_call": round(1000 * out["cpu_s"] / calls, 3),
        "calls_per_s": round(calls / out["wall_s"], 1),
        "connections_opened": stats["connections_opened"] - 1,  # less this /stats read's
    }


def run(lab: Lab) -> JSON:
    """Sequential calls for each (pooled|fresh) x (http|https), streamed as the worker reads
    them, then pooled from threads (calls include one warm-up call)."""
    plain = lab.fakellm().removesuffix("/v1")
    tls_root, ca = _start_tls(lab)
    n, k = lab.sizes.pool_calls, lab.sizes.pool_concurrency
    rows = [
        _variant(root, ca_, kind, n, 1)
        for root, ca_ in ((plain, None), (tls_root, ca))
        for kind in ("pooled", "fresh")
    ]
    rows.append(_variant(plain, None, "pooled_stream", n, 1))
    rows.append(_variant(plain, None, "pooled", n, k))
    return {"variants": rows}
