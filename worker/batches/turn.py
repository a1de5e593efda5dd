"""What a worker needs while it holds one batch's lease, and how a line's end is accounted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import BinaryIO

import redis
from prometheus_client import Counter

from chatq import batches as lines
from chatq import jobs, keys
from chatq.batches import (
    CANCELLED_CODE,
    ERROR,
    EXPIRED_CODE,
    LINE_TOO_LONG,
    OUTPUT,
    BatchStore,
    DirectoryStorage,
    Usage,
)
from worker.batches.waiting import WaitingLines
from worker.context import WorkerContext

# A line's job is kept this long once its result is in the batch (its answer then lives on
# in the batch's files), instead of CHATQ_JOB_TTL: a 50,000-line batch would otherwise hold
# 50,000 jobs' text and events in Redis for a day.
LINE_JOB_KEEP_S = 3600
LINES_FED = Counter("chatq_batch_lines_fed_total", "Batch lines made into jobs and queued")
LINES_DONE = Counter(
    "chatq_batch_lines_done_total",
    "Batch lines whose result is in their batch, by outcome",
    ["outcome"],
)
# What a line's output needs of its job (a response's line renders the whole Response).
JOB_FIELDS = (
    "id",
    "status",
    "batch",
    "batch_line",
    "custom_id",
    "result",
    "error",
    "error_status",
    "api",
    "response",
    "model",
    "created_at",
    "completed_at",
    "finish_reason",
)


@dataclass
class Turn:
    """One worker's turn at one batch, while it holds the batch's lease."""

    ctx: WorkerContext
    batches: BatchStore
    storage: DirectoryStorage
    token: str
    record: dict[str, str]
    renewed_at: float = field(default_factory=time.monotonic)
    # The loop's memory of waiting lines, which outlives its turns (worker/batches/waiting.py).
    waiting: WaitingLines = field(default_factory=WaitingLines)

    @property
    def batch_id(self) -> str:
        """The batch's id."""
        return self.record["id"]

    @property
    def redis(self) -> redis.Redis:
        """The worker's Redis client."""
        return self.ctx.store.redis

    def keep_lease(self) -> bool:
        """Renew the lease once a third of it has passed; False when another holds it now."""
        lease_s = self.ctx.settings.lease_s
        if time.monotonic() - self.renewed_at < lease_s / 3:
            return True
        self.renewed_at = time.monotonic()
        return self.batches.lease(self.batch_id, self.token, lease_s)

    def reload(self) -> dict[str, str]:
        """Read the batch's record again."""
        self.record = self.batches.get(self.batch_id) or self.record
        return self.record

    def account_error(self, number: int, text: str, skipped: bool = False) -> bool:
        """Record line `number`'s error line `text` once (failed; `skipped`: never fed);
        whether it was new."""
        return self.batches.account(self.batch_id, number, ERROR, text, "failed", skipped=skipped)

    def read_lines(self, line: int, offset: int, count: int) -> list[tuple[int, bytes, int]]:
        """Up to `count` non-blank lines of the input file from line `line` at `offset`."""
        max_line_bytes = self.ctx.settings.max_body_bytes
        with self.storage.open(self.record["input_file_id"]) as handle:
            return list(islice(lines_from(handle, offset, line, max_line_bytes), count))


UTF8_BOM = b"\xef\xbb\xbf"


def lines_from(
    handle: BinaryIO, offset: int, number: int, max_line_bytes: int
) -> Iterator[tuple[int, bytes, int]]:
    """(line number, line, offset after it) of each non-blank line from `offset`, which is
    the start of line `number`. A UTF-8 BOM that starts the file is no part of line 1. A line
    of more than `max_line_bytes` (its end of line not counted) is never held whole: it comes
    as LINE_TOO_LONG."""
    if offset == 0 and handle.read(len(UTF8_BOM)) == UTF8_BOM:
        offset = len(UTF8_BOM)
    handle.seek(offset)
    # Room for the longest line allowed and its "\r\n": what reads more is too long.
    while raw := handle.readline(max_line_bytes + 2):
        offset += len(raw)
        if len(raw) - raw.endswith(b"\n") - raw.endswith(b"\r\n") > max_line_bytes:
            if not raw.endswith(b"\n"):
                offset += _read_past_line(handle, max_line_bytes)
            raw = LINE_TOO_LONG
        if raw is LINE_TOO_LONG or raw.strip():
            yield number, raw, offset
        number += 1


def _read_past_line(handle: BinaryIO, chunk_bytes: int) -> int:
    """Read to the end of the current line, `chunk_bytes` at a time: the bytes read."""
    read = 0
    while rest := handle.readline(chunk_bytes):
        read += len(rest)
        if rest.endswith(b"\n"):
            break
    return read


def skip_bits(client: redis.Redis, batch_id: str, numbers: list[int]) -> list[bool]:
    """For each line number, whether validation marked the line as one not to run."""
    pipe = client.pipeline(transaction=False)
    for number in numbers:
        pipe.getbit(keys.batch_invalid(batch_id), number)
    return [bool(bit) for bit in pipe.execute()]


def _ended_code(client: redis.Redis, batch_id: str) -> str:
    ending = client.hget(keys.batch(batch_id), "ending")
    return EXPIRED_CODE if ending == "expired" else CANCELLED_CODE


def account_job(client: redis.Redis, batches: BatchStore, job_id: str, job_ttl_s: int) -> bool:
    """Put an ended line job's result into its batch, once; whether it was new."""
    pipe = client.pipeline(transaction=False)
    pipe.hmget(keys.job(job_id), JOB_FIELDS)
    pipe.get(keys.text(job_id))
    values, output_text = pipe.execute()
    record = {
        name: str(v) if v is not None else "" for name, v in zip(JOB_FIELDS, values, strict=True)
    }
    record["output_text"] = str(output_text or "")
    batch_id, line = record.get("batch"), record.get("batch_line")
    if not batch_id or not line or not jobs.is_terminal(record.get("status")):
        return False
    number = int(line)
    if record["status"] == jobs.CANCELLED:
        kind, usage = ERROR, (0, 0, 0, 0)
        text = lines.ended_line(
            batch_id, number, record["custom_id"] or None, _ended_code(client, batch_id)
        )
    else:
        kind, text, usage = lines.job_line(batch_id, number, record)
    outcome = "completed" if kind == OUTPUT else "failed"
    new = batches.account(batch_id, number, kind, text, outcome, Usage(*usage))
    if new:
        LINES_DONE.labels(outcome).inc()
        keep_s = min(LINE_JOB_KEEP_S, job_ttl_s)
        pipe = client.pipeline(transaction=False)
        for key in (keys.job(job_id), keys.text(job_id), keys.events(job_id)):
            pipe.expire(key, keep_s)
        pipe.execute()
    return new
