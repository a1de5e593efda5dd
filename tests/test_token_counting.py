"""Counting a prompt's tokens does not stop an event loop: a web answers other requests while
it counts a large prompt, and a batch line that waits for its key's tokens is counted once and
parsed once."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from chatq import keys
from chatq.admission import quotas
from chatq.batches import lines as batch_lines
from chatq.batches import record as batches
from chatq.batches.file_storage import DirectoryStorage
from chatq.batches.record import BatchStore
from chatq.broker.celery_app import make_celery
from chatq.chat import tokens
from chatq.config.limit_settings import KeyLimits
from chatq.config.settings import Settings
from scripts.localredis import LocalRedis
from tests.batchkit import CHAT, request_line, stored_batch
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, python_output, wait_until
from worker.batches.feed import feed
from worker.batches.loop import BatchLoop
from worker.batches.turn import Turn
from worker.batches.validate import validate
from worker.context import WorkerContext, _build

# A prompt that takes tiktoken a while: one run of a letter (no spaces for the pre-tokenizer
# to split at) is the slowest text to encode, most of a second for these 1.5 MiB on 2 cores.
# Its 196,608 tokens are over gpt-4o's 128,000: the web answers 422 as soon as it has counted,
# with no other wait (a Redis call) in which it could answer another request first.
LARGE_PROMPT_CHARS = 3 * 512 * 1024


@pytest.fixture(scope="module")
def web(fakellm: str) -> Iterator[Stack]:
    """One web process (one gevent loop), no worker, on a Redis of its own."""
    server = LocalRedis().start()
    stack = start_stack(
        server.url,
        fakellm,
        workers=0,
        CHATQ_WEB_WORKERS="1",
        CHATQ_MAX_BODY_BYTES=str(LARGE_PROMPT_CHARS + 4096),
    )
    yield stack
    stack.stop()
    server.stop()


def _queues(local_port: int, remote_port: int) -> tuple[int, int] | None:
    """(bytes not yet sent, bytes not yet read) of the loopback TCP socket from `local_port`
    to `remote_port`, as /proc/net/tcp shows it."""
    wanted = (f"0100007F:{local_port:04X}", f"0100007F:{remote_port:04X}")
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (fields[1], fields[2]) == wanted:
            tx, rx = fields[4].split(":")
            return int(tx, 16), int(rx, 16)
    return None


def _post_raw(url: str, path: str, body: bytes) -> tuple[socket.socket, int, int]:
    """Send a whole POST on a socket of its own; (the socket, its port, the server's port)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ALICE_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock, sock.getsockname()[1], int(port)


def test_the_web_answers_healthz_while_it_counts_a_large_prompt(web: Stack) -> None:
    content = "a" * LARGE_PROMPT_CHARS
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": content}]}
    sock, port, web_port = _post_raw(web.url, "/v1/jobs", json.dumps(body).encode())
    order: list[str] = []
    answer: list[bytes] = []

    def submit_answers() -> None:
        answer.append(sock.recv(65536))
        order.append("submit")

    reader = threading.Thread(target=submit_answers)
    reader.start()
    # Every byte of the body is with the web, and read: it is parsing, then counting.
    wait_until(lambda: _queues(port, web_port) == (0, 0), 30, "the body sent")
    wait_until(lambda: (_queues(web_port, port) or (1, 1))[1] == 0, 30, "the body read")
    assert requests.get(web.url + "/healthz", timeout=30).ok
    order.append("healthz")
    reader.join(60)
    sock.close()
    assert answer and answer[0].startswith(b"HTTP/1.1 422"), answer[:1]
    assert b"context_length_exceeded" in answer[0]
    assert order == ["healthz", "submit"]


# In a gevent process of its own: a greenlet that counts while another counts a prompt whose
# encoding is not built yet (half a second of building) or a large prompt. The counts run on
# a thread, so the counter greenlet goes on: its last tick comes after the count began.
_GEVENT_COUNT = """
from chatq import gevent_patch
gevent_patch.patch_all()
import gevent
from chatq.chat import tokens

ticks = []
def tick():
    while True:
        ticks.append(1)
        gevent.sleep(0.001)

def ticks_during(request):
    ticker = gevent.spawn(tick)
    gevent.sleep(0.01)
    before = len(ticks)
    tokens.count_prompt_tokens(request)
    during = len(ticks) - before
    ticker.kill()
    return during

small = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
large = {"model": "gpt-4o", "messages": [{"role": "user", "content": "a" * 500_000}]}
print(ticks_during(small), ticks_during(large))
"""


def test_a_gevent_process_goes_on_while_it_builds_an_encoding_or_counts_a_large_prompt() -> None:
    building, counting = (int(n) for n in python_output(_GEVENT_COUNT).split())
    assert building > 0 and counting > 0


# --- a batch line waiting for its key's tokens ----------------------------------------------

# Each line may ask for 600 tokens of output: the first takes most of the key's minute, the
# second waits for the bucket to refill (about 13 s at 1,000 a minute).
TPM, MAX_TOKENS = 1000, 600


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[WorkerContext]:
    """A worker's context in process, on a Redis of its own, with alice limited to TPM."""
    server = LocalRedis().start()
    settings = Settings(
        redis_url=server.url,
        files_dir=str(tmp_path),
        lease_s=10.0,
        key_limits=KeyLimits(tokens_per_minute=TPM),
    )
    context = _build(settings, make_celery(settings))
    yield context
    context.store.redis.close()
    server.stop()


def _new_batch(ctx: WorkerContext, lines: list[dict[str, Any]]) -> str:
    """A batch of alice's on these lines, as POST /v1/batches makes it; its id."""
    return stored_batch(ctx.store.redis, ctx.settings.files_dir, list(lines))


def _running_batch(ctx: WorkerContext, lines: list[dict[str, Any]]) -> Turn:
    """A batch of alice's on these lines, validated by this worker, which holds its lease."""
    store = BatchStore(ctx.store.redis, 3600)
    batch_id = _new_batch(ctx, lines)
    assert store.lease(batch_id, "w", 10.0)
    turn = Turn(
        ctx, store, DirectoryStorage(ctx.settings.files_dir), "w", store.get(batch_id) or {}
    )
    validate(turn)
    assert turn.reload()["status"] == batches.IN_PROGRESS
    return turn


def _two_lines() -> list[dict[str, Any]]:
    """Two lines of which the first takes most of the key's minute: the second waits."""
    lines = [request_line(f"l{i}", f"line {i} " * 50) for i in (1, 2)]
    for line in lines:
        line["body"]["max_tokens"] = MAX_TOKENS
    return lines


def test_a_batch_line_waiting_for_its_keys_tokens_is_counted_once(ctx: WorkerContext) -> None:
    lines = _two_lines()
    turn = _running_batch(ctx, lines)
    counted_before = tokens.prompts_counted()
    # Four turns of the batch, each with room for both lines: the second line waits.
    fed = [feed(turn, max_lines=2) for _ in range(4)]
    assert fed == [1, 0, 0, 0]
    assert turn.reload()["feed_line"] == "2"
    assert tokens.prompts_counted() - counted_before == 2  # each line once
    # The first line's job keeps its count: its run (pacing) does not count it again.
    job_id = batch_lines.line_job_id(turn.batch_id, 1)
    claim = ctx.store.claim(job_id=job_id, run_id="r", lease_s=10.0)
    expected = tokens.count_prompt_tokens({"model": "fake", **lines[0]["body"]})
    assert claim.claimed and claim.prompt_tokens == expected


def test_a_batch_line_waiting_for_its_keys_tokens_is_parsed_once(ctx: WorkerContext) -> None:
    lines = _two_lines()
    turn = _running_batch(ctx, lines)
    parsed_before = batch_lines.lines_parsed()
    # Four turns of the batch, each with room for both lines: the second line waits.
    assert [feed(turn, max_lines=2) for _ in range(4)] == [1, 0, 0, 0]
    assert batch_lines.lines_parsed() - parsed_before == 2  # each line once
    # The key's minute starts over: the kept line makes its job, not parsed again.
    ctx.store.redis.delete(quotas.state_key("alice"), quotas.held_key("alice"))
    assert feed(turn, max_lines=2) == 1
    assert batch_lines.lines_parsed() - parsed_before == 2
    assert len(turn.waiting) == 0
    record = turn.reload()
    assert (record["fed"], record["feed_line"], record["feed_done"]) == ("2", "3", "1")
    job = ctx.store.get(batch_lines.line_job_id(turn.batch_id, 2)) or {}
    raw = json.dumps(lines[1]).encode()
    parsed = batch_lines.parse_line(raw, 2, CHAT, ctx.settings)
    assert isinstance(parsed, batch_lines.Line)
    assert json.loads(job["request"]) == parsed.request
    assert (job["custom_id"], job["batch_line"]) == ("l2", "2")


def test_the_batch_loop_forgets_a_waiting_line_whose_lease_moves_or_batch_stops(
    ctx: WorkerContext,
) -> None:
    loop = BatchLoop(ctx)
    moved, cancelled = _new_batch(ctx, _two_lines()), _new_batch(ctx, _two_lines())
    loop.tick()  # validates both
    loop.tick()  # feeds each one's first line; each one's second line waits
    assert len(loop.waiting) == 2 and loop.waiting.bytes > 0
    ctx.store.redis.delete(keys.batch_lease(moved))  # its lease ran out: another worker's now
    assert BatchStore(ctx.store.redis, 3600).lease(moved, "another", 10.0)
    assert BatchStore(ctx.store.redis, 3600).cancel(cancelled) == batches.CANCELLING
    loop.tick()
    assert len(loop.waiting) == 0 and loop.waiting.bytes == 0
