"""Validating a batch's input file: every line read and checked once, before any is fed.

The invalid lines (and the blank ones) are marked in a bitmap that the feeder's reads pass
by, and each invalid one is accounted as an error line; the batch's record gets the count of
its lines, the first MAX_ERRORS_SHOWN errors and its model, and the batch starts running (or
fails, when no line can run).
"""

from __future__ import annotations

import hashlib
import logging
import time

from chatq import batches, keys
from chatq.batches import Line, LineError
from worker.batches.turn import Turn, lines_from

log = logging.getLogger(__name__)
YIELD_EVERY_LINES = 200
INVALID_FLUSH = 200
MAX_ERRORS_SHOWN = 100


class _Findings:
    """What validation has found so far."""

    def __init__(self) -> None:
        self.total = 0
        self.invalid = 0
        self.model = ""
        self.errors: list[dict[str, object]] = []
        self.pending: list[LineError] = []
        self.blank: list[int] = []
        self.seen: set[bytes] = set()

    def check(self, parsed: Line | LineError) -> Line | LineError:
        """The line, or its error; a custom_id seen before is one."""
        if isinstance(parsed, LineError):
            return parsed
        digest = hashlib.blake2b(parsed.custom_id.encode(), digest_size=16).digest()
        if digest in self.seen:
            return LineError(
                parsed.number,
                "duplicate_custom_id",
                f"`custom_id` {parsed.custom_id[:80]!r} is used by an earlier line.",
                "custom_id",
                parsed.custom_id,
            )
        self.seen.add(digest)
        self.model = self.model or str(parsed.request.get("model") or "")
        return parsed


def _mark_invalid(turn: Turn, errors: list[LineError], blank: list[int]) -> None:
    """Set the bits of lines not to run; account each invalid one as an error line."""
    pipe = turn.redis.pipeline(transaction=False)
    for number in [e.number for e in errors] + blank:
        pipe.setbit(keys.batch_invalid(turn.batch_id), number, 1)
    pipe.execute()
    for error in errors:
        turn.account_error(error.number, batches.invalid_line(turn.batch_id, error))


def _note(found: _Findings, turn: Turn, parsed: Line | LineError) -> None:
    found.total += 1
    checked = found.check(parsed)
    if isinstance(checked, LineError):
        found.invalid += 1
        found.pending.append(checked)
        if len(found.errors) < MAX_ERRORS_SHOWN:
            found.errors.append(checked.batch_error())
    if len(found.pending) + len(found.blank) >= INVALID_FLUSH:
        _mark_invalid(turn, found.pending, found.blank)
        found.pending, found.blank = [], []


def validate(turn: Turn) -> None:
    """Read the whole input file once; record its invalid lines and start the batch running."""
    record, s = turn.record, turn.ctx.settings
    found = _Findings()
    previous = 0
    with turn.storage.open(record["input_file_id"]) as handle:
        for number, raw, _ in lines_from(handle, 0, 1, s.max_body_bytes):
            # Blank lines are no requests: marked so that the feeder's scans pass them by.
            found.blank += range(previous + 1, number)
            previous = number
            _note(found, turn, batches.parse_line(raw, number, record["endpoint"], s))
            if found.total % YIELD_EVERY_LINES == 0:
                time.sleep(0)  # let the worker's other greenlets run: this is all CPU
                if not turn.keep_lease():
                    return
    _mark_invalid(turn, found.pending, found.blank)
    if found.total == 0:
        found.errors = [
            {
                "code": "empty_file",
                "message": "The input file has no request.",
                "param": None,
                "line": None,
            }
        ]
    status = turn.batches.validated(
        turn.batch_id,
        turn.token,
        total=found.total,
        invalid=found.invalid,
        errors=found.errors,
        model=found.model,
    )
    log.info(
        "batch %s validated: %d lines, %d invalid; %s",
        turn.batch_id,
        found.total,
        found.invalid,
        status,
    )
