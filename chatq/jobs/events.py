"""A job's event stream as GET /v1/jobs/{id}/events shows it (docs/api.md): typed entries
from XRANGE rows."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import pairwise
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
from msgspec import Meta, Struct

from chatq.jobs.record import JobStatus, TerminalStatus

log = logging.getLogger(__name__)


class StatusEvent(Struct, tag_field="type", tag="status", forbid_unknown_fields=True):
    """The job's status changed."""

    status: JobStatus


class DeltaEvent(Struct, tag_field="type", tag="delta", forbid_unknown_fields=True):
    """More output text."""

    delta: str


class ResetEvent(Struct, tag_field="type", tag="reset", forbid_unknown_fields=True):
    """The text so far is void (a retry starts over)."""


class EndEvent(Struct, tag_field="type", tag="end", forbid_unknown_fields=True):
    """The job ended; nothing follows."""

    status: TerminalStatus
    finish_reason: str | None = None


JobEvent = StatusEvent | DeltaEvent | ResetEvent | EndEvent


class EventsPage(Struct, forbid_unknown_fields=True):
    """A page of a job's events."""

    object: Literal["chat.completion.job.events"]
    job_id: str
    status: JobStatus
    events: list[JobEvent]
    cursor: Annotated[str, Meta(description="Opaque: pass it back as `cursor`.")]
    done: Annotated[bool, Meta(description="The job is terminal; no event follows.")]


@dataclass(frozen=True)
class Event:
    """One event of a job's stream; `id` is its stream id, the cursor ('' when the event
    shares the entry that follows it)."""

    id: str
    type: str
    value: str
    extra: str

    def public(self) -> dict[str, Any]:
        """The event as a client reads it."""
        return msgspec.to_builtins(self.typed())  # type: ignore[no-any-return]

    def typed(self) -> JobEvent:
        """The event as its struct."""
        if self.type == "delta":
            return DeltaEvent(self.value)
        if self.type == "status":
            return StatusEvent(self.value)  # type: ignore[arg-type]
        if self.type == "end":
            return EndEvent(self.value, self.extra or None)  # type: ignore[arg-type]
        return ResetEvent()


def parse_events(rows: Any) -> list[Event]:
    """The Events of XRANGE rows. A job's end is one row that also holds its last piece of
    text (`d`) and its last status (`with_status`, chatq/scripting/prelude.lua): it reads as that
    delta, that status event, then the end; the first two have no cursor of their own (`id`
    empty), as the three are one entry."""
    events = []
    for stream_id, data in rows:
        event = Event(str(stream_id), data.get("t", ""), data.get("v", ""), data.get("f", ""))
        if event.type == "end" and data.get("d"):
            events.append(Event("", "delta", data["d"], ""))
        if event.type == "end" and data.get("with_status") == "1":
            events.append(Event("", "status", event.value, ""))
        events.append(event)
    return events


class Carried(NamedTuple):
    """A delta that a notification carried (chatq/jobs/append.lua): its entry id, the id of the
    entry before it, and its text."""

    previous: str
    id: str
    text: str


_CARRIED = msgspec.json.Decoder(list[tuple[str, str, str, str]])


def decode_carried(raw: str) -> dict[str, Carried]:
    """The deltas a text notification carries, by job id ({} when it carries none it can read:
    its waiters then read the stream)."""
    if not raw:
        return {}
    try:
        return {
            job_id: Carried(prev, entry, text) for job_id, prev, entry, text in _CARRIED.decode(raw)
        }
    except msgspec.DecodeError:
        log.warning("a text notification carried deltas that are not readable")
        return {}


def continuing(carried: list[Carried], cursor: str) -> list[Event] | None:
    """The events after `cursor` that `carried` (deltas, in the order announced) holds when
    it leaves no gap after the cursor: [] when the cursor is its last; None when the stream
    must be read (a delta after the cursor whose previous entry was not announced here)."""
    start = next((i for i, c in enumerate(carried) if c.previous == cursor), None)
    if start is None:
        return [] if carried and carried[-1].id == cursor else None
    run = carried[start:]
    if any(later.previous != earlier.id for earlier, later in pairwise(run)):
        return None
    return [Event(c.id, "delta", c.text, "") for c in run]
