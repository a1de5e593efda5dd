"""Feeding a batch's lines into the `batch` lane at a bounded rate (once validated:
worker/batches/validate.py).

Lines wait in the input file: the batch's record holds a cursor (line number and byte
offset) up to which every valid line has its job. The lease holder reads on from the cursor,
makes each line's job (its id is derived from the batch and the line, and guarded by a key,
so a feeder that died and a successor that feeds the same lines again never make a line's job
twice), sends its message, and moves the cursor. A crash between making a job and sending its
message leaves a queued job without one: the sweeper sends it once its lease has run out.
A line over its key's rate limits stops the feed; it is kept parsed for its retries
(worker/batches/waiting.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from chatq import batches, broker, jobs, keys, metrics, tracing
from chatq.batches import Line, LineError
from chatq.jobs import CreateKind
from worker import admission as quotas
from worker.batches.turn import LINES_FED, Turn, skip_bits
from worker.batches.waiting import Cursor, LineJob, WaitingLine
from worker.context import WorkerContext

log = logging.getLogger(__name__)
FEED_CHUNK = 100
# How long a batch whose line waits for its key's rate limits gets no share of the room:
# other batches feed meanwhile, and the line is tried again (a tick or two later).
WAIT_HINT_S = 1.0


def make_job(turn: Turn, line: LineJob, charged: bool = False) -> bool:
    """Make (once) and enqueue the job of one line; whether this call made it. `charged`:
    its key's limits were charged for it just now (released if it had its job already)."""
    ctx, owner = turn.ctx, turn.record["owner"]
    job_id = batches.line_job_id(turn.batch_id, line.number)
    record = _line_record(turn, line, job_id)
    queue, message = broker.message_for_create(ctx.celery, ctx.settings, job_id, "batch", owner)
    # The line's job id is the same whoever feeds it: a create after a crash finds it made.
    created = ctx.store.create(
        record=record, lease_s=ctx.settings.lease_s, may_exist=True, queue=queue, message=message
    )
    if created.kind is not CreateKind.CREATED:
        if charged:
            quotas.release_line(ctx, owner, job_id)
        return False
    LINES_FED.inc()
    if not queue:  # the broker is not the store's Redis: the create pushed no message
        _send(ctx, job_id, owner)
    return True


def _line_record(turn: Turn, line: LineJob, job_id: str) -> dict[str, str]:
    """The job record of one line: a `batch` job that announces its end to its batch."""
    record = jobs.new_record(job_id, turn.record["owner"], line.model, "batch", {}, time.time())
    return (
        record
        | line.fields
        | {
            "request": line.request_json,  # written once, when the line was first admitted
            "announce": "1",
            "batch": turn.batch_id,
            "batch_line": str(line.number),
            "custom_id": line.custom_id,
            # A trace of its own, linked to its batch's: not one trace of a million lines.
            "traceparent": tracing.fresh(),
            "trace_link": turn.record.get("traceparent", ""),
        }
    )


def _send(ctx: WorkerContext, job_id: str, owner: str) -> None:
    """A line's run message, on a broker the create script cannot reach."""
    try:
        broker.enqueue(ctx.celery, job_id, "batch", state=ctx.store.redis, owner=owner)
    except Exception:
        log.exception("could not send the message of %s; the sweeper will", job_id)


def _feed_chunk(turn: Turn, size: int) -> tuple[int, bool, bool]:
    """Feed up to `size` lines from the cursor: (lines fed, whether there may be more,
    whether a line waits for its key's rate limits)."""
    record = turn.reload()
    if (
        record.get("feed_done") == "1"
        or record["status"] != batches.IN_PROGRESS
        or record.get("ending")
    ):
        turn.waiting.forget(turn.batch_id)
        return 0, False, False
    start = (int(record["feed_line"]), int(record["feed_offset"]))
    fed, (new_line, new_offset), waits, taken = _feed_from(turn, start, size)
    done = taken < size and not waits
    moved = turn.batches.fed(
        turn.batch_id,
        turn.token,
        old_line=start[0],
        new_line=new_line,
        offset=new_offset,
        lines=fed,
        done=done,
    )
    if not moved:
        turn.waiting.forget(turn.batch_id)
        return 0, False, False
    return fed, not done and not waits, waits


def _feed_from(turn: Turn, start: Cursor, size: int) -> tuple[int, Cursor, bool, int]:
    """Feed up to `size` lines from `start`, first the line kept as waiting there, if one is:
    (lines fed, the cursor to go on from, whether a line waits, lines taken)."""
    kept = turn.waiting.recall(turn.batch_id, start)
    if kept is None:
        taken = turn.read_lines(*start, size)
        return (*_feed_lines(turn, taken, start), len(taken))
    outcome = _feed_kept(turn, kept)
    if outcome == WAIT:  # nothing read, nothing parsed
        return 0, start, True, 1
    turn.waiting.forget(turn.batch_id)
    taken = turn.read_lines(*kept.after, size - 1) if size > 1 else []
    fed, resume, waits = _feed_lines(turn, taken, kept.after)
    return outcome + fed, resume, waits, 1 + len(taken)


def _feed_lines(
    turn: Turn, taken: list[tuple[int, bytes, int]], start: Cursor
) -> tuple[int, Cursor, bool]:
    """Feed the lines read: (lines fed, the cursor to go on from, whether a line waits for
    its key's rate limits: then it and those after it stay in the file, and it is kept)."""
    skips = skip_bits(turn.redis, turn.batch_id, [number for number, _, _ in taken])
    fed, resume = 0, start
    for (number, raw, end), skip in zip(taken, skips, strict=True):
        if not skip:
            parsed = batches.parse_line(raw, number, turn.record["endpoint"], turn.ctx.settings)
            outcome = _feed_parsed(turn, parsed, (resume, (number + 1, end)))
            if outcome == WAIT:
                return fed, resume, True
            fed += outcome
        resume = (number + 1, end)
    return fed, resume, False


# A feed's answer for a line over its key's rate limits: it is fed on a later turn.
WAIT = -1


def feed_line(turn: Turn, number: int, raw: bytes) -> int:
    """Parse one line and feed it (_feed_parsed; a line that waits is not kept)."""
    parsed = batches.parse_line(raw, number, turn.record["endpoint"], turn.ctx.settings)
    return _feed_parsed(turn, parsed)


def _feed_parsed(
    turn: Turn, parsed: Line | LineError, cursors: tuple[Cursor, Cursor] | None = None
) -> int:
    """Make the job of one valid line: 1 when it has one now (made here or before), 0 when
    the line cannot run after all (checked under other settings, or over its key's token
    budget: then it is an error line), WAIT when over its key's rate limits for now: then
    it is kept, with the `cursors` before and after it, for its retries (_feed_kept)."""
    if isinstance(parsed, LineError):
        return _error_line(turn, parsed)
    job_id = batches.line_job_id(turn.batch_id, parsed.number)
    admission = quotas.admit_line(turn.ctx, turn.record["owner"], job_id, parsed.request)
    if admission.wait:
        if cursors:
            line, cost, tokens = LineJob.of(parsed), admission.cost, admission.prompt_tokens
            waiting = WaitingLine(cursors[0], line, cursors[1], cost, tokens or 0)
            turn.waiting.keep(turn.batch_id, waiting)
        return WAIT
    return _admitted(turn, parsed, admission)


def _feed_kept(turn: Turn, kept: WaitingLine) -> int:
    """_feed_parsed for the line kept as waiting at the cursor: neither read nor parsed."""
    job_id = batches.line_job_id(turn.batch_id, kept.line.number)
    owner = turn.record["owner"]
    admission = quotas.admit_counted(turn.ctx, owner, job_id, kept.cost, kept.prompt_tokens)
    return WAIT if admission.wait else _admitted(turn, kept.line, admission)


def _admitted(turn: Turn, line: Line | LineJob, admission: quotas.LineAdmission) -> int:
    """The line's job made (1), or its error line when its key's limits refuse it (0)."""
    if not admission.go:
        code, message = admission.code, admission.message
        return _error_line(turn, LineError(line.number, code, message, None, line.custom_id))
    job = line if isinstance(line, LineJob) else LineJob.of(line)
    make_job(turn, replace(job, fields=job.fields | admission.record_fields), admission.charged)
    return 1


def _error_line(turn: Turn, error: LineError) -> int:
    """Account a line that cannot run as an error line; 0 lines fed."""
    turn.account_error(error.number, batches.invalid_line(turn.batch_id, error), skipped=True)
    return 0


def feed(turn: Turn, max_lines: int) -> int:
    """Feed up to `max_lines` lines (the batch's share of CHATQ_BATCH_MAX_QUEUED now, from
    worker/batches/share.py); the lines fed. A line over its key's rate limits stops the feed
    and leaves the batch out of the shares for WAIT_HINT_S."""
    total = 0
    more = True
    while more and total < max_lines and turn.keep_lease():
        fed, more, waits = _feed_chunk(turn, min(max_lines - total, FEED_CHUNK))
        total += fed
        if waits:
            until_s = metrics.redis_time(turn.redis) + WAIT_HINT_S
            turn.redis.hset(keys.batch(turn.batch_id), "feed_waits_until", repr(until_s))
    return total
