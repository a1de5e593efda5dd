"""A job's event stream as API.md shows it: one typed entry per XRANGE row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    """One entry of a job's event stream; `id` is the stream id, the cursor."""

    id: str
    type: str
    value: str
    extra: str

    def public(self) -> dict[str, Any]:
        """The event as API.md shows it."""
        if self.type == "delta":
            return {"type": "delta", "delta": self.value}
        if self.type == "status":
            return {"type": "status", "status": self.value}
        if self.type == "end":
            return {"type": "end", "status": self.value, "finish_reason": self.extra or None}
        return {"type": self.type}


def parse_event(row: Any) -> Event:
    """An Event from one XRANGE row."""
    stream_id, data = row
    return Event(str(stream_id), data.get("t", ""), data.get("v", ""), data.get("f", ""))
