"""`python -m bench.load`: read one JSON spec on stdin, run it, print `RESULT <json>`."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from bench.load import follow, loops, park, progress
from bench.load.session import client_session, raise_open_files_limit


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Dispatch on `spec["mode"]`."""
    mode = spec["mode"]
    timeout_s = float(spec.get("timeout_s", 70))
    if mode == "park":
        sent = [0]
        async with client_session(timeout_s, park.counting_trace(sent)) as s:
            return await park.park(s, spec, sent)
    async with client_session(timeout_s) as s:
        if mode == "closed":
            return await loops.closed_loop(s, spec)
        if mode == "open":
            return await loops.open_loop(s, spec)
        if mode == "follow":
            return await follow.follow(s, spec)
    raise ValueError(f"unknown mode {mode!r}")


def main() -> None:
    """Entry point."""
    raise_open_files_limit()
    spec = json.loads(sys.stdin.read())
    progress.say("READY")
    wall0 = time.monotonic()
    result = asyncio.run(run(spec))
    wall_s = time.monotonic() - wall0
    result["loadgen_cpu"] = {
        "cpu_s": round(time.process_time(), 3),
        "cpu_pct": round(100 * time.process_time() / wall_s, 1),
    }
    progress.result(result)


if __name__ == "__main__":
    main()
