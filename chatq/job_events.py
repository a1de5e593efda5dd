"""A job's event stream as GET /v1/jobs/{id}/events shows it (docs/api.md): typed entries
from XRANGE rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
        if self.type == "delta":
            return {"type": "delta", "delta": self.value}
        if self.type == "status":
            return {"type": "status", "status": self.value}
        if self.type == "end":
            return {"type": "end", "status": self.value, "finish_reason": self.extra or None}
        return {"type": self.type}


def parse_events(rows: Any) -> list[Event]:
    """The Events of XRANGE rows. A job's end is one row that also holds its last piece of
    text (`d`) and its last status (`with_status`, chatq/lua/prelude.lua): it reads as that
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
