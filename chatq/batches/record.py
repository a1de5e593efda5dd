"""Batches: their ids, statuses and record in Redis, OpenAI's batch object, their progress.

A batch is `validating`, then `in_progress` while the workers' batch loop feeds its lines
into the `batch` lane and the lines' ends are accounted, `finalizing` while its files are
written, and ends `completed`, `failed` (no valid line), `cancelled` or `expired`; a client's
cancel makes it `cancelling` first. Each step of its life is one Lua script, typed in
chatq/batches/store.py.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

import msgspec

from chatq.batches.objects import STATUSES as STATUSES
from chatq.batches.objects import TIMESTAMPS, Batch
from chatq.batches.store import BatchStore as BatchStore
from chatq.batches.store import Usage as Usage

VALIDATING, IN_PROGRESS, FINALIZING = "validating", "in_progress", "finalizing"
CANCELLING, COMPLETED, FAILED = "cancelling", "completed", "failed"
CANCELLED, EXPIRED = "cancelled", "expired"
ENDED = frozenset({COMPLETED, FAILED, CANCELLED, EXPIRED})
BATCH_ID = re.compile(r"^batch_[A-Za-z0-9_-]{16,64}$")


def new_batch_id() -> str:
    """A fresh batch id: `batch_` and 32 url-safe characters of 192 random bits."""
    return "batch_" + secrets.token_urlsafe(24)


def is_batch_id(value: str) -> bool:
    """Whether `value` has the shape of a batch id at all."""
    return bool(BATCH_ID.fullmatch(value))


def new_record(
    *,
    batch_id: str,
    owner: str,
    endpoint: str,
    input_file_id: str,
    metadata: dict[str, str] | None,
    output_expires_s: int,
) -> dict[str, str]:
    """The hash fields of a new batch (its times are set by Redis when it is written)."""
    return {
        "id": batch_id,
        "owner": owner,
        "status": VALIDATING,
        "endpoint": endpoint,
        "input_file_id": input_file_id,
        "completion_window": "24h",
        "metadata": json.dumps(metadata) if metadata is not None else "",
        "output_expires_s": str(output_expires_s),
        "ending": "",
        "total": "0",
        "completed": "0",
        "failed": "0",
        "invalid": "0",
        "skipped": "0",
        "fed": "0",
        "feed_line": "1",
        "feed_offset": "0",
        "feed_done": "0",
    }


def _int(record: dict[str, str], name: str) -> int:
    return int(record.get(name) or 0)


def _stamp(record: dict[str, str], name: str) -> int | None:
    raw = record.get(name)
    return int(float(raw)) if raw else None


def _usage(record: dict[str, str]) -> dict[str, Any]:
    input_tokens, output_tokens = _int(record, "input_tokens"), _int(record, "output_tokens")
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": _int(record, "cached_tokens")},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": _int(record, "reasoning_tokens")},
        "total_tokens": input_tokens + output_tokens,
    }


def public_view(record: dict[str, str]) -> dict[str, Any]:
    """OpenAI's batch object, built from the batch's Redis hash."""
    errors = json.loads(record.get("errors") or "[]")
    view: dict[str, Any] = {
        "id": record["id"],
        "object": "batch",
        "endpoint": record.get("endpoint", ""),
        "errors": {"object": "list", "data": errors} if errors else None,
        "input_file_id": record.get("input_file_id", ""),
        "completion_window": record.get("completion_window", "24h"),
        "status": record.get("status", VALIDATING),
        "output_file_id": record.get("output_file_id") or None,
        "error_file_id": record.get("error_file_id") or None,
        **{name: _stamp(record, name) for name in TIMESTAMPS},
        "request_counts": {
            "total": _int(record, "total"),
            "completed": _int(record, "completed"),
            "failed": _int(record, "failed"),
        },
        "usage": _usage(record),
        "metadata": json.loads(record["metadata"]) if record.get("metadata") else None,
    }
    if record.get("model"):
        view["model"] = record["model"]
    return msgspec.to_builtins(Batch(**view))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Progress:
    """Where a batch's lines are: still in the file, fed (queued or running), or done."""

    total: int
    waiting_in_file: int
    fed: int
    done: int


def progress(record: dict[str, str]) -> Progress:
    """The lines of a batch by where they are now."""
    total, done = _int(record, "total"), _int(record, "completed") + _int(record, "failed")
    valid = total - _int(record, "invalid")
    fed, skipped = _int(record, "fed"), _int(record, "skipped")
    fed_done = done - _int(record, "invalid") - skipped
    return Progress(total, max(0, valid - fed - skipped), max(0, fed - fed_done), done)
