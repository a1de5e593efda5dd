"""What counting a large prompt's tokens costs everyone else (issue 34, M4).

`python -m bench.tokencount`, on its own (not a section of `make bench`): a stack of its own
(Redis, fakellm, one web process, one worker). (1) `/healthz` asked every 10 ms, one request
at a time, while one `POST /v1/jobs` carries a 1 MB prompt: the slowest health check during
the submit is how long the web's event loop was held. (2) bob's one-line jobs, one after
another with `?wait=`, beside a batch of alice's whose 1 MB lines wait for her key's tokens
per minute: their latency, and the same without the batch.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import requests

from bench.stats import summary_ms
from tests.batchkit import own_stack, run_batch
from tests.conftest import Stack
from tests.procs import ALICE_KEY, BOB_KEY

PROMPT_CHARS = 1_000_000
PROBE_EVERY_S = 0.01
# Each 1 MB line costs about 150,000 tokens (cl100k x 1.2 for an unknown model), held while
# its job runs (fakellm answers after LINE_TTFT_S) and mostly given back when it ends (fakellm
# counts one word): two lines run within a minute's bucket of 400,000, the next one waits.
ALICE_TPM = 400_000
LINE_TTFT_S = 10
BATCH_LINES = 8


def _prompts() -> dict[str, str]:
    """1 MB of prose-like words, and 1 MB of one letter (the slowest text to encode)."""
    words = [f"w{i % 997}x{i % 13}" for i in range(PROMPT_CHARS // 4)]
    return {"words": " ".join(words)[:PROMPT_CHARS], "one letter": "a" * PROMPT_CHARS}


def _probe(url: str, stop: threading.Event, seen: list[tuple[float, float]]) -> None:
    """GET /healthz every PROBE_EVERY_S until `stop`: (sent at, seconds) of each."""
    session = requests.Session()
    while not stop.is_set():
        sent = time.monotonic()
        session.get(url + "/healthz", timeout=30).raise_for_status()
        seen.append((sent, time.monotonic() - sent))
        stop.wait(PROBE_EVERY_S)


def healthz_during_submit(stack: Stack, content: str) -> dict[str, Any]:
    """The submit's time, and the health checks sent while it ran."""
    stop, seen = threading.Event(), []  # type: ignore[var-annotated]
    prober = threading.Thread(target=_probe, args=(stack.url, stop, seen))
    prober.start()
    time.sleep(0.2)  # probes before the submit: the loop's usual answer time
    started = time.monotonic()
    answer = stack.submit(content, key=BOB_KEY)  # bob has no limits
    ended = time.monotonic()
    time.sleep(0.2)
    stop.set()
    prober.join()
    during = [s for sent, s in seen if started <= sent + s and sent <= ended]
    return {
        "status": answer.status_code,
        "submit_ms": round((ended - started) * 1000, 1),
        "healthz_during": summary_ms(during),
    }


def _bob(stack: Stack, seconds: float) -> list[float]:
    """bob's one-line jobs, one after another for `seconds`: each one's submit-to-end time."""
    session, latencies = stack.session(BOB_KEY), []
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        r = session.post(stack.url + "/v1/jobs", json=body, params={"wait": 30}, timeout=60)
        assert r.json()["status"] == "completed", r.text
        latencies.append(time.monotonic() - started)
    return latencies


def bob_beside_a_waiting_batch(stack: Stack, seconds: float) -> dict[str, Any]:
    """bob's job latency alone, then beside alice's batch of 1 MB lines over her TPM."""
    alone = _bob(stack, seconds / 2)
    line = "a" * PROMPT_CHARS
    lines: list[dict[str, Any] | str] = [
        {
            "custom_id": f"l{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": f"fake:ttft={LINE_TTFT_S}",
                "messages": [{"role": "user", "content": line}],
            },
        }
        for i in range(BATCH_LINES)
    ]
    batch = run_batch(stack.url, lines)
    beside = _bob(stack, seconds)
    state = stack.session(ALICE_KEY).get(f"{stack.url}/v1/batches/{batch['id']}", timeout=30)
    return {
        "alone": summary_ms(alone),
        "beside_batch": summary_ms(beside),
        "batch_counts": state.json()["request_counts"],
    }


def main() -> None:
    """Run both measures and print their figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0, help="bob's run beside the batch")
    args = parser.parse_args()
    env = {
        "CHATQ_KEY_LIMITS": f"alice=tpm:{ALICE_TPM}",
        "CHATQ_MAX_BODY_BYTES": str(2 * PROMPT_CHARS),
    }
    result: dict[str, Any] = {}
    with own_stack(workers=1, **env) as (stack, _):
        for name, content in _prompts().items():
            result[f"healthz, 1 MB of {name}"] = healthz_during_submit(stack, content)
        result["bob"] = bob_beside_a_waiting_batch(stack, args.seconds)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
