"""What batch lines waiting for their key's tokens cost the worker (issue 34, a line parsed once).

`python -m bench.batchwait`: one worker on a Redis and a fakellm of its own. `--batches`
batches of alice's each have one line of about 1 MB (`--shape`: one long message of words, or
many short messages); her key's tokens a minute are 2.5 times what the line is charged, held
while its job runs (fakellm answers after LINE_TTFT_S): two lines run, every other batch's
line waits for her key's tokens and is tried again about once a second. Idle, then once every
batch has been tried: the worker's CPU over `--window` seconds (and its RSS at the end), and
the latency of bob's interactive jobs (one at a time, an instant model, `?wait=10`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import redis

from bench.batchmany import probe
from bench.procstat import rss_bytes
from chatq import keys
from chatq.chat.tokens import charged_tokens, count_prompt_tokens
from scripts.localredis import LocalRedis
from tests.batchkit import create_batch, jsonl, upload
from tests.conftest import start_stack
from tests.procs import start_fakellm, wait_until

LINE_TTFT_S = 120
LINE_BYTES = 1_000_000


def _messages(shape: str) -> list[dict[str, str]]:
    """About LINE_BYTES of messages: one of prose-like words, or short ones of a few words."""
    if shape == "one":
        words = " ".join(f"w{i % 997}x{i % 13}" for i in range(LINE_BYTES // 4))
        return [{"role": "user", "content": words[:LINE_BYTES]}]
    each = {"role": "user", "content": "a few short words"}
    return [dict(each) for _ in range(LINE_BYTES // len(json.dumps(each)))]


def _body(shape: str) -> dict[str, Any]:
    return {"model": f"fake:ttft={LINE_TTFT_S}", "messages": _messages(shape), "max_tokens": 16}


def _start_batches(url: str, client: redis.Redis, count: int, shape: str) -> None:
    """`count` batches of alice's on one line each, every one fed or tried once."""
    line = {
        "custom_id": "l1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": _body(shape),
    }
    file_id = upload(url, jsonl([line])).json()["id"]
    ids = []
    for _ in range(count):
        created = create_batch(url, file_id)
        assert created.ok, created.text
        ids.append(created.json()["id"])

    def all_tried() -> bool:
        fields = [client.hmget(keys.batch(b), ["fed", "feed_waits_until"]) for b in ids]
        return all(fed == "1" or waits for fed, waits in fields)

    wait_until(all_tried, 120, "every batch's line fed or waiting")


def run(batches: int, shape: str, window_s: float) -> dict[str, Any]:
    """The probe idle, then beside `batches` batches whose line waits."""
    server = LocalRedis().start()
    fake, fake_url = start_fakellm()
    tpm = int(2.5 * charged_tokens(_body(shape), count_prompt_tokens(_body(shape)), 0))
    stack = start_stack(
        server.url,
        fake_url,
        CHATQ_KEY_LIMITS=f"alice=tpm:{tpm}",
        CHATQ_MAX_BODY_BYTES=str(2 * LINE_BYTES),
        CHATQ_BATCH_MAX_ACTIVE_PER_KEY=str(batches),
    )
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        idle = probe(stack, window_s)
        _start_batches(stack.url, client, batches, shape)
        busy = probe(stack, window_s)
        worker = next(p for p in stack.procs if p.name == "worker")
        busy["worker_rss_mib"] = round(rss_bytes(worker.pid) / 2**20)
        fed = sum(int(client.hget(keys.batch(b), "fed") or 0) for b in _active(client))
        shape_of = {"batches": batches, "shape": shape, "tpm": tpm, "fed": fed}
        return shape_of | {"idle": idle, "busy": busy}
    finally:
        client.close()
        stack.stop()
        fake.stop()
        server.stop()


def _active(client: redis.Redis) -> list[str]:
    return sorted(str(b) for b in client.smembers(keys.batches_active()))  # type: ignore[union-attr]


def main() -> None:
    """Parse the arguments, run, print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--shape", choices=("one", "many"), default="one")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of each probe")
    args = parser.parse_args()
    print(json.dumps(run(args.batches, args.shape, args.window), indent=2))


if __name__ == "__main__":
    main()
