"""`python -m bench.calls`: upstream calls from a plain client process, pooled or fresh.

Reads a JSON spec on stdin; prints one JSON line: latencies, CPU per call, wall time.
"pooled" uses the worker's own session (`worker.upstream.client.make_session`); "fresh" opens a new
connection for every call (a pool of its own per call, closed after it, as a client without
a session does); "pooled_stream" reads a streamed answer as the worker does (on past
`data: [DONE]` to the end of the body, so that the connection goes back to the pool).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from urllib3 import PoolManager, Timeout

from chatq.config.settings import Settings
from worker.upstream.client import make_session

MESSAGES = [{"role": "user", "content": "hello"}]
BODY = json.dumps({"model": "fake", "messages": MESSAGES}).encode()
STREAM_BODY = json.dumps({"model": "fake", "messages": MESSAGES, "stream": True}).encode()


def _caller(spec: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {spec['key']}", "Content-Type": "application/json"}
    url = spec["url"] + "/chat/completions"
    settings = Settings(
        worker_concurrency=int(spec["threads"]),
        upstream_urls=(spec["url"],),
        upstream_ca_file=spec.get("ca") or "",
    )
    session = make_session(settings)
    timeout = Timeout(30)

    def call(_: int) -> float:
        t0 = time.perf_counter()
        if spec["kind"] == "pooled_stream":
            with session.post_streamed(url, STREAM_BODY, headers, (30, 30)) as resp:
                for _chunk in resp.iter_content(None):  # the whole body, `[DONE]` and after
                    pass
            status = resp.status_code
        elif spec["kind"] == "pooled":
            with session.post_streamed(url, BODY, headers, (30, 30)) as resp:
                json.loads(resp.content)
            status = resp.status_code
        else:
            with PoolManager(ca_certs=spec.get("ca") or None) as fresh:
                answer = fresh.request("POST", url, body=BODY, headers=headers, timeout=timeout)
                json.loads(answer.data)
            status = answer.status
        if status != 200:
            raise RuntimeError(f"the upstream answered {status}")
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
