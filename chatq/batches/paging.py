"""Paging through an owner's sorted set of ids (its files, its batches): the ids after a
given one, read in chunks so that a page of live records is filled even when many of the
ids left in the set have expired."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import redis

LIST_CHUNK = 200


def ids_after(
    client: redis.Redis, key: str, after: str, newest_first: bool
) -> Iterator[list[str]] | None:
    """Chunks of the ids of `key` that follow `after` ('' for the first), in order; None when
    `after` is an id the set never had, or has no more: nothing follows it."""
    start = 0
    if after:
        rank = cast(
            int | None, client.zrevrank(key, after) if newest_first else client.zrank(key, after)
        )
        if rank is None:
            return None
        start = rank + 1
    return _chunks(client, key, start, newest_first)


def _chunks(client: redis.Redis, key: str, start: int, newest_first: bool) -> Iterator[list[str]]:
    while True:
        end = start + LIST_CHUNK - 1
        ids = [str(i) for i in cast(list[Any], client.zrange(key, start, end, desc=newest_first))]
        if not ids:
            return
        start += len(ids)
        yield ids
