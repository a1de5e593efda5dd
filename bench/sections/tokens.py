"""Issue 3 / 12: time from a token leaving fakellm to that token reaching a client, which
follows its job through the events long-poll, or through the same resource as SSE."""

from __future__ import annotations

import json
import signal

from bench.lab import Lab
from bench.loadrun import run_load
from bench.procstat import CpuMeter
from bench.sections.common import JSON, body
from bench.stack import ChatqStack
from bench.stats import summary_ms
from tests.procs import ALICE_KEY

TPS = 10
TTFT_S = 0.2
# The steady figure leaves out each stream's first half second of tokens.
STEADY_AFTER = TPS // 2
# Each way of following gets its own stream numbers, so that the tap's stamps never mix.
VIAS = {"events": 0, "sse": 500}
STACKS = [("tokens", {"upstream": "tap"})]


def _requests(streams: int, tokens: int, first: int) -> list[JSON]:
    """One request per stream; fakellm echoes the words `sNNNwKKK` one token each."""
    model = f"fake:ttft={TTFT_S:g},tps={TPS}"
    return [
        body(model, " ".join(f"s{i:03d}w{k:03d}" for k in range(tokens)))
        for i in range(first, first + streams)
    ]


def _follow(lab: Lab, stack: ChatqStack, via: str) -> JSON:
    s = lab.sizes
    spec = {
        "mode": "follow",
        "via": via,
        "base": stack.url,
        "key": ALICE_KEY,
        "timeout_s": 60,
        "requests": _requests(s.token_streams, s.token_count, VIAS[via]),
    }
    meter = CpuMeter(stack.pids()).start()
    with lab.profiled(f"tokens-{via}", stack.python_pids()):
        result = run_load(spec, timeout_s=120)
    return {**result, "cpu": meter.stop()}


def _latency(result: JSON, left: dict[str, float], expected: int) -> JSON:
    """Over every token; and over those after each stream's first STEADY_AFTER tokens, once
    the 100 submits and claims of the start have been served. CPU per token seen, by role
    (the submits' included)."""
    arrived = result["arrivals"]
    lat = [arrived[w] - left[w] for w in arrived if w in left]
    steady = [arrived[w] - left[w] for w in arrived if w in left and _index(w) >= STEADY_AFTER]
    return {
        "tokens_seen": len(lat),
        "tokens_expected": expected,
        "latency": summary_ms(lat),
        "steady_latency": summary_ms(steady),
        "requests": result["pages"],
        "cpu_ms_per_token": {
            role: round(1000 * used["cpu_s"] / max(len(lat), 1), 3)
            for role, used in result["cpu"].items()
        },
    }


def _index(word: str) -> int:
    """The token's place in its stream: `sNNNwKKK` -> KKK."""
    return int(word.partition("w")[2])


def run(lab: Lab) -> JSON:
    """`token_streams` jobs streaming at TPS through a stamping proxy, for each way of
    following: first the events long-poll, then SSE."""
    tap, _ = lab.tap()
    name, recipe = STACKS[0]
    stack = lab.chatq(name, **recipe)
    results = {via: _follow(lab, stack, via) for via in VIAS}
    lab.drop(name)
    tap.signal(signal.SIGTERM)
    assert tap.process is not None
    tap.process.wait(10)
    left = json.loads(lab.tap_file.read_text())
    s = lab.sizes
    expected = s.token_streams * s.token_count
    by_via = {via: _latency(result, left, expected) for via, result in results.items()}
    events = by_via["events"]
    return {
        "streams": s.token_streams,
        "tokens_per_stream": s.token_count,
        "tps": TPS,
        **by_via,
        "tokens_seen": events["tokens_seen"],
        "tokens_expected": expected,
        "latency": events["latency"],
        "pages": events["requests"],
        "flush_interval_s": float(stack.env.get("CHATQ_FLUSH_INTERVAL", "0.025")),
    }
