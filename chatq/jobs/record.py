"""The job record: its fields in Redis, its states, and its public JSON view."""

from __future__ import annotations

import json
import secrets
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct, structs

from chatq.chat import ChatCompletion
from chatq.errors import JobError

# A job's statuses and priorities, declared where the scripts' loader reads them too.
from chatq.words import CANCELLED as CANCELLED
from chatq.words import COMPLETED as COMPLETED
from chatq.words import FAILED as FAILED
from chatq.words import IN_PROGRESS as IN_PROGRESS
from chatq.words import PRIORITIES as PRIORITIES
from chatq.words import QUEUED as QUEUED
from chatq.words import STATUSES as STATUSES
from chatq.words import TERMINAL as TERMINAL
from chatq.words import JobStatus as JobStatus
from chatq.words import Priority as Priority
from chatq.words import TerminalStatus as TerminalStatus

JOB_ID_PATTERN = "^job_[A-Za-z0-9_-]{16,64}$"

JSONDict = dict[str, Any]
Time = Annotated[float, Meta(description="Unix time, seconds.")]


class Job(Struct, forbid_unknown_fields=True):
    """The job object clients read (docs/api.md)."""

    id: Annotated[str, Meta(pattern=JOB_ID_PATTERN)]
    object: Literal["chat.completion.job"]
    status: JobStatus
    model: str
    priority: Priority
    created_at: Time
    started_at: Annotated[float | None, Meta(description="Unix time the current attempt started.")]
    completed_at: Annotated[float | None, Meta(description="Unix time the job ended.")]
    cached: Annotated[bool, Meta(description="Answered from the result cache.")]
    attempts: Annotated[int, Meta(ge=0)]
    output_text: Annotated[str, Meta(description="Text so far; partial while running.")]
    result: Annotated[
        ChatCompletion | None, Meta(description="The upstream's `chat.completion`, once completed.")
    ]
    error: Annotated[JobError | None, Meta(description="Once failed.")]
    trace_id: Annotated[
        str | None,
        Meta(
            description="The W3C trace id the job runs in: the client's `traceparent`'s, "
            "else its own."
        ),
    ]


def new_job_id(shard: str = "") -> str:
    """A fresh job id: `job_` and 32 url-safe characters of 192 random bits; the first of
    them is its shard (chatq/keys.py), which `shard` may choose (186 random bits left)."""
    token = secrets.token_urlsafe(24)
    return "job_" + (shard + token[1:] if shard else token)


def new_run_id() -> str:
    """A token naming one execution of a job, so a late or lost run cannot write."""
    return secrets.token_hex(8)


def new_record(
    job_id: str, owner: str, model: str, priority: str, request: JSONDict, now: float
) -> dict[str, str]:
    """The hash fields of a new job; its text lives in a key of its own (keys.text)."""
    return {
        "id": job_id,
        "owner": owner,
        "status": QUEUED,
        "model": model,
        "priority": priority,
        "created_at": repr(now),
        "started_at": "",
        "completed_at": "",
        "cached": "0",
        "attempts": "0",
        "takeovers": "0",
        "result": "",
        "error": "",
        "request": json.dumps(request, separators=(",", ":")),
        "run": "",
    }


def counted_fields(prompt_tokens: int | None) -> dict[str, str]:
    """The record field that keeps a prompt's token count, once made, so that the job's run
    (its pacing) does not count it again; none when it was not counted."""
    return {} if prompt_tokens is None else {"prompt_tokens": str(prompt_tokens)}


def _time(raw: str | None) -> float | None:
    return float(raw) if raw else None


def _json(raw: str | None) -> Any:
    return json.loads(raw) if raw else None


def public_view(record: dict[str, str]) -> JSONDict:
    """The job object clients read (docs/api.md), built from its Redis hash."""
    job = Job(
        id=record["id"],
        object="chat.completion.job",
        status=record["status"],  # type: ignore[arg-type]
        model=record.get("model", ""),
        priority=record.get("priority", "interactive"),  # type: ignore[arg-type]
        created_at=_time(record.get("created_at")),  # type: ignore[arg-type]
        started_at=_time(record.get("started_at")),
        completed_at=_time(record.get("completed_at")),
        cached=record.get("cached") == "1",
        attempts=int(record.get("attempts") or 0),
        output_text=record.get("output_text", ""),
        result=_json(record.get("result")),
        error=_json(record.get("error")),
        trace_id=record.get("traceparent", "")[3:35] or None,
    )
    return structs.asdict(job)


def is_terminal(status: str | None) -> bool:
    """Whether a job in `status` has ended for good."""
    return status in TERMINAL
