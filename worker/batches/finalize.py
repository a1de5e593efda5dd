"""Writing a batch's output and error files: one finalizer (the lease holder) streams the
accounted lines, in the order they were accounted, from Redis into the file storage.

The files are written under temporary names and committed whole, and their ids are derived
from the batch's, so a finalizer that dies and a successor that starts over write the same
files; the batch ends (and Redis learns of the files) only after both are committed.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any, cast

from chatq import keys
from chatq.batches import ERROR, OUTPUT, Upload
from worker.batches.turn import Turn

log = logging.getLogger(__name__)
PAGE_LINES = 1000
FILES = ((OUTPUT, "output_file_id", "output"), (ERROR, "error_file_id", "error"))


def result_file_id(batch_id: str, kind: str) -> str:
    """The id of a batch's output or error file, the same every time."""
    digest = hashlib.sha256(f"{batch_id}:{kind}".encode()).digest()
    return "file-" + base64.urlsafe_b64encode(digest).decode()[:32]


class _Writers:
    """The output and error files being written, with their sizes."""

    def __init__(self, turn: Turn) -> None:
        self.uploads: dict[str, Upload] = {}
        self.sizes = {OUTPUT: [0, 0], ERROR: [0, 0]}  # bytes, lines
        for kind, _, _ in FILES:
            self.uploads[kind] = turn.storage.create(result_file_id(turn.batch_id, kind))

    def write(self, stored: str) -> None:
        kind, data = stored[:1], (stored[1:] + "\n").encode()
        self.uploads[kind].write(data)
        self.sizes[kind][0] += len(data)
        self.sizes[kind][1] += 1

    def discard(self) -> None:
        for upload in self.uploads.values():
            upload.discard()


def _write_all(turn: Turn, writers: _Writers) -> bool:
    """Stream every accounted line into the files; False when the lease was lost."""
    start = 0
    while True:
        numbers = cast(
            list[Any],
            turn.redis.lrange(keys.batch_order(turn.batch_id), start, start + PAGE_LINES - 1),
        )
        if not numbers:
            return True
        for stored in cast(list[Any], turn.redis.hmget(keys.batch_results(turn.batch_id), numbers)):
            if stored:
                writers.write(str(stored))
        start += len(numbers)
        if not turn.keep_lease():
            return False


def finalize(turn: Turn, final: str) -> str:
    """Write the batch's files and end it as `final`; its status now ('lost' if the lease was)."""
    writers = _Writers(turn)
    try:
        if not _write_all(turn, writers):
            writers.discard()
            return "lost"
        files = []
        expires_s = int(turn.record.get("output_expires_s") or turn.ctx.settings.files_ttl_s)
        for kind, field, name in FILES:
            size_bytes, lines = writers.sizes[kind]
            if not lines:
                writers.uploads[kind].discard()
                continue
            file_id = result_file_id(turn.batch_id, kind)
            writers.uploads[kind].commit()
            files.append(
                (field, file_id, size_bytes, lines, f"{turn.batch_id}_{name}.jsonl", expires_s)
            )
    except BaseException:
        writers.discard()
        raise
    status = turn.batches.finish(turn.batch_id, turn.token, final, files)
    log.info(
        "batch %s %s: %d output lines, %d error lines",
        turn.batch_id,
        status,
        writers.sizes[OUTPUT][1],
        writers.sizes[ERROR][1],
    )
    return status
