"""Settling a batch's fed lines: accounting those whose end the relay has not reported, and
stopping the unfinished ones when the batch is cancelled or its window has passed.

The relay accounts a line within moments of its end; this is the net under it (an outbox
entry whose reader died waits for another reader's take-over, and the outbox is capped). Its
scans start at the batch's low-water mark (every fed line below it is accounted), so they
cost about the lines in flight, not the whole batch.
"""

from __future__ import annotations

import logging

from chatq import batches, jobs, keys, metrics
from chatq.batches import LineError
from worker.batches.turn import Turn, account_job, skip_bits

log = logging.getLogger(__name__)
MAX_SCAN_LINES = 5000
# A line that ended this recently is left to the relay, which is about to account it.
RELAY_GRACE_S = 5.0
SKIP_CHUNK = 500


def pending_lines(turn: Turn) -> list[int]:
    """Fed lines not accounted yet (from the low-water mark, a bounded scan); the mark moves
    up to the first of them."""
    record = turn.reload()
    mark, end = int(record.get("scan_line") or 1), int(record["feed_line"])
    numbers = list(range(mark, min(end, mark + MAX_SCAN_LINES)))
    if not numbers:
        return []
    skips = skip_bits(turn.redis, turn.batch_id, numbers)
    pipe = turn.redis.pipeline(transaction=False)
    for number in numbers:
        pipe.hexists(keys.batch_results(turn.batch_id), number)
    done = pipe.execute()
    pending = [n for n, skip, d in zip(numbers, skips, done, strict=True) if not skip and not d]
    new_mark = pending[0] if pending else numbers[-1] + 1
    if new_mark != mark:
        turn.redis.hset(keys.batch(turn.batch_id), "scan_line", new_mark)
    return pending


def _line_jobs(turn: Turn, numbers: list[int]) -> list[tuple[int, str, str, float]]:
    """(line number, job id, status, end time or 0) of each line's job."""
    ids = [batches.line_job_id(turn.batch_id, n) for n in numbers]
    pipe = turn.redis.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(keys.job(job_id), "status", "completed_at")
    rows = pipe.execute()
    return [
        (number, job_id, status or "missing", float(ended or 0))
        for number, job_id, (status, ended) in zip(numbers, ids, rows, strict=True)
    ]


def settle(turn: Turn, stop: str = "") -> int:
    """Account the ended lines the relay has not; `stop` 'queued' cancels the lines still
    queued (a cancel), 'all' those running too (the window has passed). The lines accounted."""
    now = metrics.redis_time(turn.redis)
    accounted = 0
    ttl_s = turn.ctx.settings.job_ttl_s
    rows = _line_jobs(turn, pending_lines(turn))
    # Queued lines first: the slot of a running line stopped here would otherwise go to a
    # queued line before its turn came, and that line would reach the upstream after the end.
    rows.sort(key=lambda row: row[2] != jobs.QUEUED)
    for number, job_id, status, ended_at in rows:
        if jobs.is_terminal(status):
            if stop or now - ended_at >= RELAY_GRACE_S:
                accounted += account_job(turn.redis, turn.batches, job_id, ttl_s)
        elif (status == jobs.QUEUED and stop) or (status == jobs.IN_PROGRESS and stop == "all"):
            turn.ctx.store.cancel(job_id=job_id, lease_s=turn.ctx.settings.lease_s)
        elif status == "missing":  # a batch must still end: the line is an error
            log.warning("batch %s: the job %s of a fed line is gone", turn.batch_id, job_id)
            accounted += _lost(turn, number)
    return accounted


def _lost(turn: Turn, number: int) -> int:
    lost = batches.ended_line(turn.batch_id, number, None, batches.LOST_CODE)
    return int(turn.account_error(number, lost))


def _skip_line(turn: Turn, number: int, raw: bytes, code: str) -> int:
    """Account a line that never ran as stopped by the batch's end; 1 if it has a job after
    all (a feeder died between making it and moving the cursor): that one is settled."""
    if turn.redis.exists(keys.job(batches.line_job_id(turn.batch_id, number))):
        return 1
    parsed = batches.parse_line(raw, number, turn.record["endpoint"], turn.ctx.settings)
    custom_id = parsed.custom_id if not isinstance(parsed, LineError) else None
    ended = batches.ended_line(turn.batch_id, number, custom_id, code)
    turn.account_error(number, ended, skipped=True)
    return 0


def skip_unfed(turn: Turn, code: str) -> bool:
    """Account every line not yet fed as stopped (`code`), up to the end of the file; False
    when the lease was lost on the way."""
    while turn.keep_lease():
        record = turn.reload()
        if record.get("feed_done") == "1":
            return True
        line, offset = int(record["feed_line"]), int(record["feed_offset"])
        taken = turn.read_lines(line, offset, SKIP_CHUNK)
        skips = skip_bits(turn.redis, turn.batch_id, [number for number, _, _ in taken])
        fed = sum(
            _skip_line(turn, number, raw, code)
            for (number, raw, _), skip in zip(taken, skips, strict=True)
            if not skip
        )
        new_line, new_offset = (taken[-1][0] + 1, taken[-1][2]) if taken else (line, offset)
        if not turn.batches.fed(
            turn.batch_id,
            turn.token,
            old_line=line,
            new_line=new_line,
            offset=new_offset,
            lines=fed,
            done=len(taken) < SKIP_CHUNK,
        ):
            return False
    return False
