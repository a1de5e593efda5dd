"""Issue 3: time from a token leaving fakellm to that token reaching an events client."""

from __future__ import annotations

import json
import signal

from bench.lab import Lab
from bench.loadrun import run_load
from bench.sections.common import JSON, body
from bench.stats import summary_ms
from tests.procs import ALICE_KEY

TPS = 10
TTFT_S = 0.2
STACKS = [("tokens", {"upstream": "tap"})]


def _requests(streams: int, tokens: int) -> list[JSON]:
    """One request per stream; fakellm echoes the words `sNNNwKKK` one token each."""
    model = f"fake:ttft={TTFT_S:g},tps={TPS}"
    return [body(model, " ".join(f"s{i:03d}w{k:03d}" for k in range(tokens)))
            for i in range(streams)]


def run(lab: Lab) -> JSON:
    """`token_streams` jobs streaming at TPS through a stamping proxy, read by long-polls."""
    tap, _ = lab.tap()
    name, recipe = STACKS[0]
    stack = lab.chatq(name, **recipe)
    s = lab.sizes
    spec = {"mode": "follow", "base": stack.url, "key": ALICE_KEY, "timeout_s": 60,
            "requests": _requests(s.token_streams, s.token_count)}
    with lab.profiled("tokens", stack.python_pids()):
        result = run_load(spec, timeout_s=120)
    lab.drop(name)
    tap.signal(signal.SIGTERM)
    assert tap.process is not None
    tap.process.wait(10)
    left = json.loads(lab.tap_file.read_text())
    arrived = result["arrivals"]
    lat = [arrived[w] - left[w] for w in arrived if w in left]
    return {"streams": s.token_streams, "tokens_per_stream": s.token_count, "tps": TPS,
            "tokens_seen": len(lat), "tokens_expected": s.token_streams * s.token_count,
            "latency": summary_ms(lat), "pages": result["pages"],
            "flush_interval_s": float(stack.env.get("CHATQ_FLUSH_INTERVAL", "0.025"))}
