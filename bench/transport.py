"""`python -m bench.transport`: CPU per upstream call of the worker's requests.Session and of
the raw urllib3 pool it replaced, plain and streamed, in one client process.

Reads a JSON spec on stdin (`url`, `key`, `calls`, `rounds`); prints one JSON line. Each round makes
`calls` sequential calls per variant in blocks of `BLOCK_CALLS`, the variants taking turns block by
block (their order reversed every other block), so that a slower spell of a shared machine falls on
every variant alike. The session path is the worker's own (`worker.upstream.client.make_session`,
`UpstreamSession.post_streamed`); the raw one is a minimal copy of the worker's former caller, kept
here only: a PoolManager of the same reporting connections, `urlopen` with urllib3's retries and
redirects off, the body unread until streamed. A streamed answer is read to its end, as the worker
reads it.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from urllib3 import PoolManager, Timeout
from urllib3.connection import HTTPConnection

from chatq.config.settings import Settings
from worker.upstream.client import make_session
from worker.upstream.connections import KEEPALIVE_OPTIONS, POOLS

MESSAGES = [{"role": "user", "content": "hello"}]
BODIES = {
    "plain": json.dumps({"model": "fake", "messages": MESSAGES}).encode(),
    "streamed": json.dumps({"model": "fake", "messages": MESSAGES, "stream": True}).encode(),
}
CONNECT_S, READ_S = 5.0, 30.0
BLOCK_CALLS = 25
# An open call: (its response, how to read it to the end and give its connection back).
Opened = tuple[Any, Callable[[], None]]


def _raw_caller(url: str, headers: dict[str, str], body: bytes) -> Callable[[], Opened]:
    manager = PoolManager(
        num_pools=10,
        maxsize=1,
        socket_options=HTTPConnection.default_socket_options + KEEPALIVE_OPTIONS,
    )
    manager.pool_classes_by_scheme = POOLS
    streamed = body == BODIES["streamed"]

    def open_call() -> Opened:
        resp = manager.urlopen(
            "POST",
            url,
            body=body,
            headers=headers,
            timeout=Timeout(connect=CONNECT_S, read=READ_S),
            retries=False,
            redirect=False,
            preload_content=False,
        )

        def finish() -> None:
            if streamed:
                for _chunk in resp.stream(None):
                    pass
            else:
                json.loads(resp.read())
            resp.close()
            resp.release_conn()

        return resp, finish

    return open_call


def _session_caller(url: str, headers: dict[str, str], body: bytes) -> Callable[[], Opened]:
    session = make_session(Settings(upstream_urls=(url,), worker_concurrency=1))
    streamed = body == BODIES["streamed"]

    def open_call() -> Opened:
        resp = session.post_streamed(url, body, headers, (CONNECT_S, READ_S))

        def finish() -> None:
            with resp:
                if streamed:
                    for _chunk in resp.iter_content(chunk_size=None):
                        pass
                else:
                    json.loads(resp.content)

        return resp, finish

    return open_call


PATHS = {"urllib3": _raw_caller, "session": _session_caller}


def _tracked_per_open_call(open_call: Callable[[], Opened], calls: int = 20) -> float:
    """GC-tracked objects one open call holds (its headers in, its body unread), on average."""
    held = 0
    for _ in range(calls):
        gc.collect()
        before = len(gc.get_objects())
        _resp, finish = open_call()
        held += len(gc.get_objects()) - before
        finish()
    return held / calls


def _cpu_s(open_call: Callable[[], Opened], calls: int) -> float:
    cpu0 = time.process_time()
    for _ in range(calls):
        open_call()[1]()
    return time.process_time() - cpu0


def _round(callers: dict[str, Callable[[], Opened]], calls: int) -> dict[str, float]:
    """CPU ms per call of each variant over `calls` calls each, the variants taking turns."""
    cpu_s = dict.fromkeys(callers, 0.0)
    order = list(callers)
    for block in range(max(1, calls // BLOCK_CALLS)):
        for name in order if block % 2 == 0 else order[::-1]:
            cpu_s[name] += _cpu_s(callers[name], BLOCK_CALLS)
    blocks = max(1, calls // BLOCK_CALLS)
    return {name: 1000 * spent / (blocks * BLOCK_CALLS) for name, spent in cpu_s.items()}


def main() -> None:
    """Measure every (path, body) variant; print CPU ms per call of each round, and objects."""
    spec = json.loads(sys.stdin.read())
    url = spec["url"] + "/chat/completions"
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "Authorization": f"Bearer {spec['key']}",
    }
    callers = {
        f"{path}_{kind}": make(url, headers, body)
        for path, make in PATHS.items()
        for kind, body in BODIES.items()
    }
    for open_call in callers.values():
        open_call()[1]()  # the first call pays for the connection and first-use work
    cpu: dict[str, list[float]] = {name: [] for name in callers}
    for _ in range(int(spec["rounds"])):
        for name, ms in _round(callers, int(spec["calls"])).items():
            cpu[name].append(ms)
    objects = {name: _tracked_per_open_call(c) for name, c in callers.items()}
    sys.stdout.write(json.dumps({"cpu_ms_per_call": cpu, "tracked_objects": objects}) + "\n")


if __name__ == "__main__":
    main()
