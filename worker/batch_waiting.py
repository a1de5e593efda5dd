"""The batch lines that wait for their keys' rate limits, kept parsed until they are fed.

A line over its key's minute limits stops its batch's feed, and the batch tries it again on
a later turn (about once a second) until it passes. Each batch has at most one such line,
at its cursor. The batch loop keeps it here, parsed and checked, with the cursor before and
after it: a retry neither reads the line nor parses it again, and reads nothing at all when
the line waits once more. A line is forgotten when it is fed, when its batch stops feeding
(cancelled, expired, ended) and when another worker holds the batch's lease; a worker that
takes the batch over parses it once more.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from chatq.batch_lines import Line

# The bounds of one process's memory. Lines wait round-robin, each retried about once a
# second: a memory that pushed its oldest line out for a new one would, with more lines than
# room, lose every line before its retry. So a line that does not fit is not kept (it is
# parsed on each retry, as if there were no memory), and the kept ones stay until fed.
# MAX_BYTES holds one key's CHATQ_BATCH_MAX_ACTIVE_PER_KEY (100) batches each waiting on a
# line of the default CHATQ_MAX_BODY_BYTES (1 MiB) of text: about as much as the process
# holds anyway while it feeds a chunk of such lines. MAX_LINES bounds the small ones.
MAX_LINES = 1_000
MAX_BYTES = 128 * 1024 * 1024

Cursor = tuple[int, int]  # a line number and the byte offset where that line starts


@dataclass(frozen=True)
class WaitingLine:
    """A line that waits: the batch's cursor when it waited, the line, the cursor past it."""

    at: Cursor
    line: Line
    after: Cursor


def held_bytes(value: object, limit: int) -> int:
    """What `value` and everything in it take in memory, as sys.getsizeof counts them (an
    object met twice counts twice); the count stops once it is over `limit`."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total


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
        if len(self._lines) >= self.max_lines:
            return False
        room = self.max_bytes - self.bytes
        line = waiting.line
        size = held_bytes((line.request, line.fields, line.custom_id), room)
        if size > room:
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
