"""A response's events as Server-Sent Events, replayed from its job's event stream.

Every stream, first or resumed, replays the job's events from the first one (the numbering
is deterministic, chatq/responses/events.py) and sends those numbered above `starting_after`;
then it follows the job until it ends.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import msgspec

from chatq.errors import ApiError
from chatq.jobs import erase
from chatq.responses import FINAL_EVENT, EventMaker, JSONDict, ResponseErrorEvent, response_id
from web.context import Services
from web.jobs import SSE_KEEPALIVE, STREAM_ENDING_ERRORS, follow, load_owned

log = logging.getLogger(__name__)


def sse_event(event: JSONDict) -> str:
    """One event: its type, its sequence number as the SSE id, its JSON."""
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event['type']}\nid: {event['sequence_number']}\ndata: {data}\n\n"


def _error(maker: EventMaker, code: str, message: str) -> str:
    event = ResponseErrorEvent("error", code, message, None, maker.sequence_number)
    return sse_event(msgspec.to_builtins(event))


def _events(svc: Services, record: dict[str, str], maker: EventMaker) -> Iterator[JSONDict | None]:
    """Stream events as the job's come (None after a silent keepalive interval)."""
    for page in follow(svc, record["id"], "0", through_drain=True):
        if not page:
            yield None
        for event in page:
            yield from maker.feed(event)
            if event.type == "end":
                yield from maker.end(load_owned(svc, record["id"], record["owner"]))


def response_stream(
    svc: Services,
    record: dict[str, str],
    starting_after: int,
    cancel_on_disconnect: bool,
    delete_at_end: bool,
) -> Iterator[str]:
    """The response's events numbered above `starting_after`, until it ends; with
    `delete_at_end` (`store: false`) the response is deleted once it has been sent."""
    job_id = record["id"]
    maker = EventMaker(record)
    ended = False
    yield f": chatq response {response_id(job_id)} after {starting_after}\n\n"
    try:
        for event in _events(svc, record, maker):
            if event is None:
                yield SSE_KEEPALIVE
            elif event["sequence_number"] > starting_after:
                ended = ended or event["type"] in FINAL_EVENT.values()
                yield sse_event(event)
    except GeneratorExit:
        # The client went away: the response carries on unless configured otherwise.
        if cancel_on_disconnect and not ended:
            svc.store.cancel(job_id=job_id, lease_s=svc.settings.lease_s)
        raise
    except STREAM_ENDING_ERRORS as exc:
        log.warning("response stream of %s ended early: %s", job_id, type(exc).__name__)
        if isinstance(exc, ApiError):  # deleted or expired meanwhile
            code = "response_not_found" if exc.status == 404 else exc.code
            yield _error(maker, code, "The response no longer exists.")
        else:
            yield _error(
                maker,
                "stream_interrupted",
                "The stream was interrupted; resume it "
                "with GET /v1/responses/{id}?stream=true&starting_after=N.",
            )
        return
    if ended and delete_at_end:
        erase(svc.store, job_id, svc.settings.lease_s)
