"""The batch lines that wait for their keys' rate limits, kept until they are fed.

A line over its key's minute limits stops its batch's feed, and the batch tries it again on
a later turn (about once a second) until it passes. Each batch has at most one such line,
at its cursor. The batch loop keeps it here as its job will hold it (its request as JSON,
made once) with what its key's limits charge it and the cursor before and after it: a retry
neither reads the line nor parses it again, and reads nothing at all when the line waits
once more. A line is forgotten when it is fed, when its batch stops feeding (cancelled,
expired, ended) and when another worker holds the batch's lease; a worker that takes the
batch over parses it once more.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

from chatq.batches import Line

# The bounds of one process's memory. Lines wait round-robin, each retried about once a
# second: a memory that pushed its oldest line out for a new one would, with more lines than
# room, lose every line before its retry. So a line that does not fit is not kept (it is
# parsed on each retry, as if there were no memory), and the kept ones stay until fed.
# MAX_BYTES holds one key's CHATQ_BATCH_MAX_ACTIVE_PER_KEY (100) batches each waiting on a
# line of the default CHATQ_MAX_BODY_BYTES (1 MiB): a line is kept as JSON text, about its
# size in the file whatever its shape (parsed, 1 MB of short messages takes 8 to 10 MB).
# MAX_LINES bounds the small ones.
MAX_LINES = 1_000
MAX_BYTES = 128 * 1024 * 1024
LINE_OVERHEAD_BYTES = 1024  # the objects around a kept line's strings

Cursor = tuple[int, int]  # a line number and the byte offset where that line starts


@dataclass(frozen=True)
class LineJob:
    """A valid line as its job holds it: its request as JSON and its record's extra fields."""

    number: int
    custom_id: str
    model: str
    request_json: str
    fields: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, line: Line) -> LineJob:
        """The job form of a parsed line (its request written as jobs.new_record writes it)."""
        request_json = json.dumps(line.request, separators=(",", ":"))
        return cls(
            line.number, line.custom_id, str(line.request["model"]), request_json, line.fields
        )

    @property
    def size_bytes(self) -> int:
        """What the line takes in memory, its strings counted as sys.getsizeof counts them."""
        strings = [
            self.custom_id,
            self.model,
            self.request_json,
            *self.fields,
            *self.fields.values(),
        ]
        return LINE_OVERHEAD_BYTES + sum(sys.getsizeof(s) for s in strings)


@dataclass(frozen=True)
class WaitingLine:
    """A line that waits: the batch's cursor when it waited, the line, the cursor past it,
    and what its key's limits charge it (limits.admit_counted)."""

    at: Cursor
    line: LineJob
    after: Cursor
    cost: int
    prompt_tokens: int


class WaitingLines:
    """One batch loop's waiting lines, by batch id; at most MAX_LINES and MAX_BYTES."""

    def __init__(self, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.bytes = 0
        self._lines: dict[str, tuple[WaitingLine, int]] = {}

    def __len__(self) -> int:
        return len(self._lines)

    def keep(self, batch_id: str, waiting: WaitingLine) -> bool:
        """Keep the line that waits at the batch's cursor, if it fits; whether it is kept."""
        self.forget(batch_id)
        size = waiting.line.size_bytes
        if len(self._lines) >= self.max_lines or self.bytes + size > self.max_bytes:
            return False
        self._lines[batch_id] = (waiting, size)
        self.bytes += size
        return True

    def recall(self, batch_id: str, at: Cursor) -> WaitingLine | None:
        """The line kept as waiting at the batch's cursor `at`, if any (one kept at another
        cursor is forgotten: the batch moved on without this worker)."""
        kept = self._lines.get(batch_id)
        if kept is None:
            return None
        if kept[0].at != at:
            self.forget(batch_id)
            return None
        return kept[0]

    def forget(self, batch_id: str) -> None:
        """Forget the batch's waiting line, if one is kept."""
        kept = self._lines.pop(batch_id, None)
        if kept is not None:
            self.bytes -= kept[1]

    def keep_only(self, batch_ids: set[str]) -> None:
        """Forget the lines of every batch but these (those this loop feeds now)."""
        for batch_id in [b for b in self._lines if b not in batch_ids]:
            self.forget(batch_id)
