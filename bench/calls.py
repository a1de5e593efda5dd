"""`python -m bench.calls`: upstream calls from a plain client process, pooled or fresh.

Reads a JSON spec on stdin; prints one JSON line: latencies, CPU per call, wall time.
"pooled" uses the worker's own session (`worker.upstream.make_session`); "fresh" opens a
new connection for every call, as `requests.post` without a session does; "pooled_stream"
reads a streamed answer as the worker does (on past `data: [DONE]` to the end of the body,
so that the connection goes back to the pool).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from chatq.config import Settings
from worker.upstream import make_session

BODY = {"model": "fake", "messages": [{"role": "user", "content": "hello"}]}
STREAM_BODY = {**BODY, "stream": True}


def _streamed(session: requests.Session, url: str, **kwargs: Any) -> requests.Response:
    """A streamed call read as the worker reads it: the whole body, `[DONE]` and what follows."""
    with session.post(url, json=STREAM_BODY, stream=True, **kwargs) as resp:
        for _ in resp.iter_content(chunk_size=None):
            pass
    return resp


def _caller(spec: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {spec['key']}"}
    url = spec["url"] + "/chat/completions"
    verify = spec.get("ca") or True
    settings = Settings(worker_concurrency=int(spec["threads"]), upstream_urls=(spec["url"],))
    session = make_session(settings)

    def call(_: int) -> float:
        t0 = time.perf_counter()
        if spec["kind"] == "pooled_stream":
            _streamed(session, url, headers=headers, timeout=30, verify=verify)
        else:
            post = session.post if spec["kind"] == "pooled" else requests.post
            resp = post(url, json=BODY, headers=headers, timeout=30, verify=verify)
            resp.raise_for_status()
            resp.json()
        return time.perf_counter() - t0

    return call


def main() -> None:
    """Run `calls` calls over `threads` threads; print latencies and CPU."""
    spec = json.loads(sys.stdin.read())
    call = _caller(spec)
    call(0)  # the first call pays for imports and the first connection in every variant
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(int(spec["threads"])) as pool:
        latencies = list(pool.map(call, range(int(spec["calls"]))))
    out = {
        "latencies": latencies,
        "cpu_s": time.process_time() - cpu0,
        "wall_s": time.perf_counter() - wall0,
    }
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
