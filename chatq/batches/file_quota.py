"""Each key's room for files: at most CHATQ_FILES_MAX_BYTES_PER_KEY bytes in at most
CHATQ_FILES_MAX_COUNT_PER_KEY files, kept in Redis so that every web process sees one count.

A key's usage counts its files (uploads, and its batches' output and error files) from the
step that records one (chatq/batches/file_add.lua, batch_finish.lua) to the step that deletes it
(file_delete.lua, by the client or the janitor once it expired): the same atomic steps, so
the count cannot drift from the files listed. An upload in progress holds room as its bytes
arrive (file_hold.lua): uploads running at once on any web cannot pass the quota together.
Its hold goes when it becomes a file or ends without one, or lapses HOLD_S after the
upload last asked (its web died). Output files are never refused (their batch was accepted):
they may take a key past its quota, and then its uploads are refused until it deletes files.
Files recorded before quotas existed carry no `counted` mark: they take no room, give none.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, cast

import redis

from chatq import keys
from chatq.batches import file_scripts as files_scripts
from chatq.errors import ApiError
from chatq.topology import BACKEND_ERRORS

# An upload asks for room this far ahead of its bytes (a Redis call per step), and asks
# again at least once a step, which keeps its hold from lapsing while it streams.
STEP_BYTES = 4 * 1024 * 1024
HOLD_S = 600


@dataclass(frozen=True)
class Usage:
    """What a key's files take, and what its uploads in progress hold."""

    bytes: int
    count: int
    held_bytes: int
    held_count: int


class FileQuota:
    """The quota of every key, in one Redis."""

    def __init__(self, client: redis.Redis, max_bytes: int, max_count: int) -> None:
        self.redis = client
        self.max_bytes = max_bytes
        self.max_count = max_count
        self._hold = files_scripts.HOLD.on(client)
        self._unhold = files_scripts.UNHOLD.on(client)

    def hold(self, owner: str, upload_id: str, need_bytes: int, want_bytes: int) -> int:
        """Hold at least `need_bytes` (up to `want_bytes`) for the upload; the bytes held.

        ApiError 400 `files_count_quota_exceeded` / `files_bytes_quota_exceeded` when the
        key has no room for one more file / for `need_bytes`."""
        kind, value = self._hold(
            owner=owner,
            id=upload_id,
            need=need_bytes,
            want=max(need_bytes, want_bytes),
            max_bytes=self.max_bytes,
            max_files=self.max_count,
            hold_s=HOLD_S,
        )
        if kind == "files":
            raise over_count(value, self.max_count)
        if kind == "bytes":
            raise over_bytes(value, self.max_bytes)
        return value

    def release(self, owner: str, upload_id: str) -> None:
        """The upload ended without a file: its hold gives its room back."""
        self._unhold(owner=owner, id=upload_id)

    def usage(self, owner: str) -> Usage:
        """The key's usage now."""
        fields = ("bytes", "count", "held_bytes", "held_count")
        got = self.redis.hmget(keys.files_usage(owner), fields)
        return Usage(*(int(v or 0) for v in cast(list[Any], got)))


def over_count(count: int, max_count: int) -> ApiError:
    """The answer to an upload when the key has as many files as its quota allows."""
    return ApiError(
        400,
        "files_count_quota_exceeded",
        f"This key has {count} files and may keep at most {max_count}; delete files you no "
        "longer need (DELETE /v1/files/{file_id}) and upload again.",
        param="file",
    )


def over_bytes(used_bytes: int, max_bytes: int) -> ApiError:
    """The answer to an upload that would take the key's files past its bytes quota."""
    return ApiError(
        400,
        "files_bytes_quota_exceeded",
        f"This file would take this key's files past its storage quota of {max_bytes} bytes "
        f"(they take {used_bytes} bytes now); delete files you no longer need "
        "(DELETE /v1/files/{file_id}) or upload a smaller file.",
        param="file",
    )


class Hold:
    """One upload's hold on its key's quota, grown ahead of the bytes it receives."""

    def __init__(self, quota: FileQuota, owner: str, upload_id: str, max_file_bytes: int) -> None:
        self.quota = quota
        self.owner = owner
        self.upload_id = upload_id
        self.max_file_bytes = max_file_bytes
        self.held_bytes = 0
        self._asked_at_bytes = -1

    def start(self, least_bytes: int, declared_bytes: int | None) -> None:
        """Hold room for the file before its first byte: `least_bytes` it will have for sure,
        its request's declared size (an upper bound) if any, else a first step."""
        want = STEP_BYTES if declared_bytes is None else declared_bytes
        self._ask(min(least_bytes, self.max_file_bytes), min(want, self.max_file_bytes))

    def cover(self, size_bytes: int) -> None:
        """The file has `size_bytes` now: hold more first if they pass the hold."""
        if size_bytes > self.held_bytes or size_bytes >= self._asked_at_bytes + STEP_BYTES:
            self._ask(size_bytes, min(size_bytes + STEP_BYTES, self.max_file_bytes))

    def _ask(self, need_bytes: int, want_bytes: int) -> None:
        self._asked_at_bytes = need_bytes
        self.held_bytes = self.quota.hold(self.owner, self.upload_id, need_bytes, want_bytes)

    def release(self) -> None:
        """The upload ended without a file: give the room back (or let it lapse, Redis gone)."""
        if self._asked_at_bytes >= 0:
            with contextlib.suppress(*BACKEND_ERRORS):
                self.quota.release(self.owner, self.upload_id)
