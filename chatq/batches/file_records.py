"""The metadata of files, in Redis: who owns each, its size, its expiry; OpenAI's file object.

The bytes live in a FileStorage (chatq/batches/file_storage.py). Metadata is written only once the
bytes are committed, and deleted before them, so a file Redis lists can always be read (but for a
crash between the two steps of a delete, which leaves bytes nobody lists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import redis
from msgspec import structs

from chatq import keys
from chatq.batches import file_scripts as files_scripts
from chatq.batches.objects import PURPOSE_INPUT as PURPOSE_INPUT
from chatq.batches.objects import PURPOSE_OUTPUT as PURPOSE_OUTPUT
from chatq.batches.objects import File
from chatq.batches.paging import ids_after
from chatq.scripting import flat_pairs


def new_meta(
    *,
    file_id: str,
    owner: str,
    size_bytes: int,
    lines: int,
    filename: str,
    purpose: str,
    created_at: float,
    expires_at: float,
) -> dict[str, str]:
    """The hash fields of a file's metadata."""
    return {
        "id": file_id,
        "owner": owner,
        "bytes": str(size_bytes),
        "lines": str(lines),
        "filename": filename,
        "purpose": purpose,
        "created_at": repr(created_at),
        "expires_at": repr(expires_at),
    }


def public_file_view(meta: dict[str, str]) -> dict[str, Any]:
    """OpenAI's file object."""
    file = File(
        id=meta["id"],
        object="file",
        bytes=int(meta.get("bytes") or 0),
        created_at=int(float(meta.get("created_at") or 0)),
        expires_at=int(float(meta["expires_at"])) if meta.get("expires_at") else None,
        filename=meta.get("filename", ""),
        purpose=meta.get("purpose", PURPOSE_INPUT),
        status="processed",
    )
    return structs.asdict(file)


def is_live(meta: dict[str, str] | None, now: float) -> bool:
    """Whether a file's metadata exists and it has not expired."""
    if not meta:
        return False
    expires_at = meta.get("expires_at")
    return not expires_at or float(expires_at) > now


@dataclass(frozen=True)
class Page:
    """One page of a list: the files, and whether more follow."""

    files: list[dict[str, str]]
    has_more: bool


class FileIndex:
    """Files' metadata in one Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._delete = files_scripts.DELETE.on(client)
        self._add = files_scripts.ADD.on(client)

    def add(self, meta: dict[str, str]) -> None:
        """Record a committed file: its metadata, its owner's list, its expiry, and its bytes
        in its owner's quota, its upload's hold let go (chatq/batches/file_quota.py)."""
        self._add(meta=flat_pairs(meta.items()))

    def get(self, file_id: str, owner: str, now: float) -> dict[str, str] | None:
        """The file's metadata if it is `owner`'s and has not expired."""
        meta = cast(dict[str, str], self.redis.hgetall(keys.file_meta(file_id)))
        if not is_live(meta, now) or meta.get("owner") != owner:
            return None
        return meta

    def page(
        self, owner: str, *, after: str, limit: int, newest_first: bool, purpose: str, now: float
    ) -> Page:
        """Up to `limit` live files of `owner` after the file `after` ('' for the first)."""
        chunks = ids_after(self.redis, keys.files_of(owner), after, newest_first)
        if chunks is None:  # an id this list never had, or deleted since: nothing follows
            return Page([], False)
        found: list[dict[str, str]] = []
        for ids in chunks:
            found += [
                m
                for m in self._metas(ids)
                if is_live(m, now) and (not purpose or m.get("purpose") == purpose)
            ]
            if len(found) > limit:
                break
        return Page(found[:limit], len(found) > limit)

    def _metas(self, ids: list[str]) -> list[dict[str, str]]:
        pipe = self.redis.pipeline(transaction=False)
        for file_id in ids:
            pipe.hgetall(keys.file_meta(file_id))
        return [m for m in pipe.execute() if m]

    def delete(self, file_id: str, owner: str) -> str:
        """Forget `owner`'s file: 'deleted', 'missing' or 'in_use' (a batch reads it)."""
        return self._delete(id=file_id, owner=owner)

    def expire(self, file_id: str) -> str:
        """Forget a file whose time is up (the janitor): as `delete`."""
        return self._delete(id=file_id, owner="")

    def due(self, now: float, limit: int = 100) -> list[str]:
        """Ids of files whose expiry has passed."""
        due = self.redis.zrangebyscore(keys.files_expiry(), "-inf", now, start=0, num=limit)
        return [str(i) for i in cast(list[Any], due)]
