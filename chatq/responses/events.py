"""The Responses API's stream events of a response, derived from its job's event stream.

The derivation is deterministic: replaying a job's events from the first gives the same
events with the same `sequence_number`s (from 0), so a stream resumes after any number by
replaying and skipping, for as long as the job is kept. Mapping:

- the first `status` event: `response.created`, then `response.queued` (or
  `response.in_progress`); a later `status` queued or in_progress: `response.queued` or
  `response.in_progress`;
- the first `delta` of a message: `response.output_item.added` and
  `response.content_part.added`; each `delta`: `response.output_text.delta`;
- `reset` (generation restarted after text was sent): the message so far is closed as
  `incomplete` (`output_text.done`, `content_part.done`, `output_item.done`); the restarted
  text comes as a new message at the next `output_index`, `msg_<token>_<n>` after n restarts;
- `end`: the message is closed (`completed`, else `incomplete`), then `response.completed`,
  `response.incomplete` (a cut answer, or cancelled: the spec has no cancelled event) or
  `response.failed`, carrying the whole Response.
"""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

import msgspec

from chatq import jobs
from chatq.jobs import Event
from chatq.responses.inputs import JSONDict
from chatq.responses.objects import STREAM_EVENTS
from chatq.responses.translation import message_id
from chatq.responses.view import (
    INCOMPLETE,
    item_status,
    message_item,
    render,
    snapshot,
    status_of,
    text_part,
)

FINAL_EVENT = {
    jobs.COMPLETED: "response.completed",
    INCOMPLETE: "response.incomplete",
    jobs.CANCELLED: "response.incomplete",
    jobs.FAILED: "response.failed",
}
# The struct of each event type (chatq/responses/objects.py declares them).
EVENT_OF: dict[str, Any] = {
    kind: event for event in STREAM_EVENTS for kind in get_args(get_type_hints(event)["type"])
}
_STATUS_EVENT = {jobs.QUEUED: "response.queued", jobs.IN_PROGRESS: "response.in_progress"}


class EventMaker:
    """Turns one response's job events, fed in order from the first, into stream events."""

    def __init__(self, record: dict[str, str]) -> None:
        self.record = record  # only its fixed fields are read
        self.sequence_number = 0
        self.status = ""
        self.output_index = -1
        self.text = ""
        self.open = False

    def _emit(self, kind: str, **fields: object) -> JSONDict:
        event = EVENT_OF[kind](type=kind, **fields, sequence_number=self.sequence_number)
        self.sequence_number += 1
        return msgspec.to_builtins(event)  # type: ignore[no-any-return]

    @property
    def item_id(self) -> str:
        """The id of the current (or last) message."""
        base = message_id(self.record["id"])
        return base if self.output_index <= 0 else f"{base}_{self.output_index}"

    def _where(self) -> JSONDict:
        return {"item_id": self.item_id, "output_index": self.output_index, "content_index": 0}

    def _status(self, status: str) -> list[JSONDict]:
        if status not in _STATUS_EVENT:
            if self.status:
                return []  # an end: `end` announces it
            status = jobs.IN_PROGRESS  # born ended (a cache hit): it is being answered
        out = []
        if not self.status:
            out.append(self._emit("response.created", response=snapshot(self.record, status)))
        if status != self.status:
            out.append(self._emit(_STATUS_EVENT[status], response=snapshot(self.record, status)))
        self.status = status
        return out

    def _open(self) -> list[JSONDict]:
        self.output_index += 1
        self.open, self.text = True, ""
        item = message_item(self.item_id, "in_progress", [])
        return [
            self._emit("response.output_item.added", output_index=self.output_index, item=item),
            self._emit("response.content_part.added", **self._where(), part=text_part("")),
        ]

    def _close(self, item: JSONDict) -> list[JSONDict]:
        self.open = False
        return [
            self._emit("response.output_text.done", **self._where(), text=self.text, logprobs=[]),
            self._emit("response.content_part.done", **self._where(), part=text_part(self.text)),
            self._emit("response.output_item.done", output_index=self.output_index, item=item),
        ]

    def _delta(self, piece: str) -> list[JSONDict]:
        # Text before any status: a job born with it (a cache hit), answered now.
        out = [] if self.status else self._status(jobs.IN_PROGRESS)
        if not self.open:
            out += self._open()
        if piece:
            self.text += piece
            out.append(
                self._emit("response.output_text.delta", **self._where(), delta=piece, logprobs=[])
            )
        return out

    def feed(self, event: Event) -> list[JSONDict]:
        """The stream events for the next job event; an `end` needs `end` as well."""
        if event.type == "status":
            return self._status(event.value)
        if event.type == "delta":
            return self._delta(event.value)
        if event.type == "reset" and self.open:
            return self._close(message_item(self.item_id, INCOMPLETE, [text_part(self.text)]))
        return []

    def end(self, final: dict[str, str]) -> list[JSONDict]:
        """The last events, from the ended job's record."""
        status = status_of(final)
        out = self._status(jobs.IN_PROGRESS) if not self.status else []
        if not self.open and status in (jobs.COMPLETED, INCOMPLETE):
            out += self._open()  # a completed response has a message, even an empty one
        response = render(final, self.item_id)
        if self.open:
            items = response["output"] or [
                message_item(self.item_id, item_status(status), [text_part(self.text)])
            ]
            out += self._close(items[0])
        return [*out, self._emit(FINAL_EVENT[status], response=response)]
