"""The steps of a batch's life in Redis (its statuses: chatq/batches/record.py): one Lua script each
(chatq/batches/batch_*.lua), typed here. The steps the workers' batch loop takes check that its
worker holds the batch's lease.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

import redis

from chatq import keys
from chatq.batches import scripts
from chatq.batches.paging import ids_after
from chatq.scripting import flat_pairs

LEASE_CHUNK = 500  # leases taken by one script call: Redis waits on no call for long


@dataclass(frozen=True)
class Usage:
    """Tokens one line used."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0


class BatchStore:
    """Batches in one Redis; see the module docstring."""

    def __init__(self, client: redis.Redis, ttl_s: int) -> None:
        self.redis = client
        self.ttl_s = ttl_s
        self._create = scripts.CREATE.on(client)
        self._cancel = scripts.CANCEL.on(client)
        self._lease = scripts.LEASE.on(client)
        self._account = scripts.ACCOUNT.on(client)
        self._validated = scripts.VALIDATED.on(client)
        self._feed = scripts.FEED.on(client)
        self._advance = scripts.ADVANCE.on(client)
        self._finish = scripts.FINISH.on(client)

    def get(self, batch_id: str) -> dict[str, str] | None:
        """The batch's record, or None."""
        record = cast(dict[str, str], self.redis.hgetall(keys.batch(batch_id)))
        return record or None

    def create(self, record: dict[str, str], window_s: float, max_active: int) -> str:
        """Write a new batch unless its owner has `max_active` unfinished ones: 'created',
        'missing' (its file is gone) or 'limit'."""
        return self._create(
            id=record["id"],
            owner=record["owner"],
            file_id=record["input_file_id"],
            window_s=window_s,
            max_active=max_active,
            record=flat_pairs(record.items()),
        )

    def cancel(self, batch_id: str) -> str:
        """Ask a running batch to stop; its status now."""
        return self._cancel(id=batch_id)

    def page(self, owner: str, after: str, limit: int) -> tuple[list[dict[str, str]], bool]:
        """Up to `limit` of `owner`'s batches after `after`, newest first; and whether more."""
        key = keys.batches_of(owner)
        chunks = ids_after(self.redis, key, after, newest_first=True)
        if chunks is None:
            return [], False
        found: list[dict[str, str]] = []
        for ids in chunks:
            pipe = self.redis.pipeline(transaction=False)
            for batch_id in ids:
                pipe.hgetall(keys.batch(batch_id))
            records = pipe.execute()
            gone = [i for i, r in zip(ids, records, strict=True) if not r]
            if gone:  # expired batches leave their owner's list lazily
                self.redis.zrem(key, *gone)
            found += [r for r in records if r]
            if len(found) > limit:
                break
        return found[:limit], len(found) > limit

    # --- the steps of the workers' batch loop ----------------------------------------

    def lease(self, batch_id: str, token: str, lease_s: float) -> bool:
        """Take or renew the batch's lease for `token`; whether it holds it."""
        return self.lease_many([batch_id], token, lease_s)[0]

    def lease_many(self, batch_ids: list[str], token: str, lease_s: float) -> list[bool]:
        """Take or renew the leases of these batches for `token` (a script call per
        LEASE_CHUNK); whether it holds each."""
        held: list[bool] = []
        for start in range(0, len(batch_ids), LEASE_CHUNK):
            chunk = batch_ids[start : start + LEASE_CHUNK]
            held += self._lease(token=token, lease_ms=int(lease_s * 1000), ids=tuple(chunk))
        return held

    def account(
        self,
        batch_id: str,
        line: int,
        kind: str,
        text: str,
        outcome: str,
        usage: Usage | None = None,
        skipped: bool = False,
    ) -> bool:
        """Record a line's result once; whether it was new."""
        u = usage or Usage()
        return self._account(
            id=batch_id,
            line=line,
            kind=kind,
            text=text,
            outcome=outcome,
            input_tokens=u.input_tokens,
            cached_tokens=u.cached_tokens,
            output_tokens=u.output_tokens,
            reasoning_tokens=u.reasoning_tokens,
            skipped=skipped,
        )

    def validated(
        self,
        batch_id: str,
        token: str,
        *,
        total: int,
        invalid: int,
        errors: list[dict[str, Any]],
        model: str,
    ) -> str:
        """Record what validation found; the status now ('lost': not our lease)."""
        return self._validated(
            id=batch_id,
            token=token,
            total=total,
            invalid=invalid,
            errors_json=json.dumps(errors),
            model=model,
        )

    def fed(
        self,
        batch_id: str,
        token: str,
        *,
        old_line: int,
        new_line: int,
        offset: int,
        lines: int,
        done: bool,
    ) -> bool:
        """Move the feeding cursor past the lines whose jobs exist now."""
        return self._feed(
            id=batch_id,
            token=token,
            old_line=old_line,
            new_line=new_line,
            offset=offset,
            lines=lines,
            done=done,
        )

    def advance(self, batch_id: str, token: str, op: str) -> str:
        """'expire' or 'finalize' a running batch when due; the status now."""
        return self._advance(id=batch_id, token=token, op=op)

    def finish(
        self,
        batch_id: str,
        token: str,
        final: str,
        files: list[tuple[str, str, int, int, str, int]],
    ) -> str:
        """End the batch as `final` with its files (field, id, bytes, lines, name, expires_s)."""
        return self._finish(
            id=batch_id, token=token, final=final, ttl_s=self.ttl_s, files=flat_pairs(files)
        )
