"""A batch outlives the processes that run it: a worker SIGKILLed while it feeds the batch and
runs its lines, webs SIGKILLed and SIGTERMed mid-batch and mid-upload. Every line ends in the
output or error file exactly once, and the upstream is called once per line, but for the
calls a killed worker had in flight (those lines run again elsewhere, to completion once)."""

from __future__ import annotations

import os
import signal
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chatq import keys
from chatq.batches import lines
from chatq.runtime import heartbeats
from tests.batchkit import (
    content,
    own_stack,
    request_line,
    run_batch,
    session,
    upstream_calls,
    wait_ended,
    wait_for,
)
from tests.procs import ALICE_KEY, start_web, wait_until

# Killed workers and webs mid-batch take half a minute: `make test-slow`.
pytestmark = pytest.mark.slow

SLOTS = 3


def _completed_at_least(n: int) -> Any:
    return lambda batch: batch["request_counts"]["completed"] >= n


def _assert_each_line_once(url: str, batch: dict[str, Any], n: int) -> None:
    assert batch["status"] == "completed", batch
    assert batch["request_counts"] == {"total": n, "completed": n, "failed": 0}
    assert batch["error_file_id"] is None
    output = content(url, batch["output_file_id"])
    assert Counter(line.custom_id for line in output) == Counter(f"x{i}" for i in range(n))
    for line in output:
        assert line.completion().choices[0].message.content == f"line {line.custom_id}"


def _lines(n: int, model: str) -> list[dict[str, Any] | str]:
    return [request_line(f"x{i}", f"line x{i}", model) for i in range(n)]


def test_a_worker_killed_while_it_feeds_and_runs_lines_loses_none_and_repeats_none() -> None:
    with own_stack(
        workers=2, CHATQ_LEASE="2", CHATQ_BATCH_MAX_QUEUED="10", CHATQ_WORKER_CONCURRENCY=str(SLOTS)
    ) as (stack, upstream):
        n = 60
        before = upstream_calls(upstream)
        batch = run_batch(stack.url, _lines(n, "fake:ttft=0.6"))
        wait_for(stack.url, batch["id"], _completed_at_least(6))
        holder = stack.redis.get(keys.batch_lease(batch["id"]))
        assert holder, "no worker holds the batch"
        host, pid, _ = holder.split(":")
        feeder = next(p for p in stack.procs if p.name == "worker" and p.pid == int(pid))
        # The worker that feeds the batch also runs lines: killed right after a fresh heartbeat
        # says all its slots are busy, it dies holding lines (each takes 0.6 s or more).
        first = heartbeats.parse(stack.redis.hget(keys.workers(), f"{host}:{pid}"))

        def fresh_and_full() -> bool:
            beat = heartbeats.parse(stack.redis.hget(keys.workers(), f"{host}:{pid}"))
            return beat.seen_s != first.seen_s and beat.busy == SLOTS

        wait_until(fresh_and_full, 10, "the feeder running a line in each slot")
        feeder.kill()
        ended = wait_ended(stack.url, batch["id"], timeout_s=120)
        _assert_each_line_once(stack.url, ended, n)
        jobs = [
            stack.redis.hgetall(keys.job(lines.line_job_id(batch["id"], i)))
            for i in range(1, n + 1)
        ]
        assert {job["status"] for job in jobs} == {"completed"}
        # A line is claimed once, or again after its worker died holding it: only those can
        # have been sent twice, and each completed once (one output line).
        rerun = sum(int(job["attempts"]) - 1 for job in jobs)
        assert 1 <= rerun <= SLOTS  # it had lines in flight: at most one per slot
        assert n <= upstream_calls(upstream) - before <= n + rerun
        assert stack.redis.scard(keys.batches_active()) == 0


def _half_upload(url: str) -> socket.socket:
    """An upload that sends its headers and the start of a 10 MB file, then nothing."""
    host, port = url.removeprefix("http://").split(":")
    boundary = "cut-short"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="big.jsonl"\r\n\r\n'
    ).encode()
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        f"POST /v1/files HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer "
        f"{ALICE_KEY}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(head) + 10_000_000}\r\n\r\n".encode()
        + head
        + b"x" * 200_000
    )
    return sock


def test_webs_killed_mid_batch_and_mid_upload_change_nothing(tmp_path: Path) -> None:
    files_dir = tmp_path / "files"
    with own_stack(
        CHATQ_BATCH_MAX_QUEUED="4", CHATQ_WORKER_CONCURRENCY="4", CHATQ_FILES_DIR=str(files_dir)
    ) as (stack, upstream):
        first = stack.procs[-1]
        second, second_url = start_web(stack.env)
        third, third_url = start_web(stack.env)
        stack.procs += [second, third]
        n = 30
        before = upstream_calls(upstream)
        batch = run_batch(stack.url, _lines(n, "fake:ttft=0.2"))
        wait_for(second_url, batch["id"], _completed_at_least(5))
        cut = _half_upload(stack.url)
        partial = files_dir / ".partial"
        wait_until(lambda: partial.is_dir() and any(partial.iterdir()), 10, "upload started")
        first.kill()
        cut.close()
        wait_for(second_url, batch["id"], _completed_at_least(15))
        second.signal(signal.SIGTERM)
        ended = wait_ended(third_url, batch["id"])
        _assert_each_line_once(third_url, ended, n)
        assert upstream_calls(upstream) - before == n
        listed = session().get(f"{third_url}/v1/files", timeout=10).json()["data"]
        assert {f["id"] for f in listed} == {batch["input_file_id"], ended["output_file_id"]}
        kept = {p.name for p in files_dir.iterdir()} - {".partial"}
        assert kept == {batch["input_file_id"], ended["output_file_id"]}
        assert os.listdir(partial)  # left for the janitor, never listed nor read
