"""A job's events: a JSON long-poll page with a cursor, or the same as Server-Sent Events."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import msgspec
import redis
from flask import Blueprint, Response

from chatq import jobs
from chatq.errors import ApiError, job_not_found
from chatq.jobs import Event, EventsPage
from chatq.topology import BACKEND_ERRORS
from web import admission, http
from web.context import Services, authorize, services
from web.http import ACCEPT, CURSOR, LAST_EVENT_ID, WAIT, json_response
from web.jobs.following import Follower, poll
from web.jobs.waiting import Hold, load_owned

bp = Blueprint("events", __name__, url_prefix="/v1/jobs")
# Once headers are sent these can only end a stream: the job expired, or Redis left.
STREAM_ENDING_ERRORS: tuple[type[Exception], ...] = (ApiError, redis.ResponseError, *BACKEND_ERRORS)
# A comment line with no blank line after it: a blank line would end an event, and parsers
# that keep the last `id:` across events (the openai SDK's) then hand on one with empty data.
SSE_KEEPALIVE = ": keepalive\n"
_CURSOR = re.compile(r"(0|([0-9]{1,20})-([0-9]{1,20}))\Z")
_MAX_ID_PART = 2**64 - 1


def valid_cursor(raw: str | None) -> str:
    """A cursor from the client ('0' when absent); 400 when it is not one we gave out."""
    if raw is None or raw == "":
        return "0"
    match = _CURSOR.match(raw)
    parts = [int(p) for p in match.groups()[1:] if p is not None] if match else []
    # A Redis stream id is two 64-bit numbers, and nothing comes after the largest one.
    if not match or any(p > _MAX_ID_PART for p in parts) or parts == [_MAX_ID_PART] * 2:
        name = CURSOR.name
        raise ApiError(400, CURSOR.code, f"`{name}` is not a cursor this API gave out.", param=name)
    return raw


def is_done(events: list[Event], status: str) -> bool:
    """Whether the job is terminal and no event follows these."""
    if events:
        return events[-1].type == "end"
    return jobs.is_terminal(status)


def _page(job_id: str, events: list[Event], status: str, cursor: str) -> dict[str, object]:
    page = EventsPage(
        object="chat.completion.job.events",
        job_id=job_id,
        status=status,  # type: ignore[arg-type]
        events=[e.typed() for e in events],
        cursor=events[-1].id if events else cursor,
        done=is_done(events, status),
    )
    return msgspec.to_builtins(page)  # type: ignore[no-any-return]


def wants_sse() -> bool:
    """Whether the client asked for Server-Sent Events."""
    return "text/event-stream" in (http.text(ACCEPT) or "")


@bp.get("/<job_id>/events")
def job_events(job_id: str) -> Response:
    """Events after `cursor`, long-polled; or an SSE stream with `Accept: text/event-stream`."""
    svc = services()
    owner = authorize(svc)
    sse = wants_sse()
    wait_s, asked = http.requested_wait(WAIT, svc.settings)
    cursor = valid_cursor(http.text(LAST_EVENT_ID) if sse else None)
    if cursor == "0":
        cursor = valid_cursor(http.text(CURSOR))
    if not http.is_job_id(job_id):
        raise job_not_found()
    if sse:
        if not jobs.is_terminal(load_owned(svc, job_id, owner)["status"]):
            admission.hold(svc.held, owner)
        return sse_response(sse_events(svc, job_id, cursor))
    poll_s = admission.poll_wait(svc.held, owner, wait_s)
    events, status = poll(svc, job_id, owner, cursor, http.jittered(poll_s) if poll_s else 0)
    headers = {http.PREFERENCE_APPLIED.name: f"wait={wait_s:g}"} if asked else {}
    return json_response(_page(job_id, events, status, cursor), 200, headers)


def sse_response(body: Iterator[str]) -> Response:
    """A streamed text/event-stream response that proxies should not buffer."""
    headers = {http.STREAM_CACHE_CONTROL.name: "no-cache", http.ACCEL_BUFFERING.name: "no"}
    return Response(body, mimetype="text/event-stream", headers=headers)


def follow(
    svc: Services, job_id: str, cursor: str, through_drain: bool = False
) -> Iterator[list[Event]]:
    """Pages of new events until the job ends; an empty page after each keepalive interval."""
    hold = Hold(svc.settings.sse_keepalive_s, through_drain, terminal_only=False)
    with svc.listener.waiting(job_id, terminal_only=False) as waiter:
        follower = Follower(svc, waiter, cursor)
        while True:
            events = follower.page(hold)
            yield events
            if is_done(events, follower.status) or svc.listener.stops(through_drain):
                return


def sse_events(svc: Services, job_id: str, cursor: str) -> Iterator[str]:
    """The job's events as SSE, each with its `id:` (the cursor) when it has one, until it
    ends (an end's status event has none: a client resuming after it gets it again, and the
    end)."""
    yield f"retry: 1000\n: chatq job {job_id} since {cursor} at {time.time():.3f}\n\n"
    try:
        for events in follow(svc, job_id, cursor):
            if not events:
                yield SSE_KEEPALIVE
            for event in events:
                cursor_line = f"id: {event.id}\n" if event.id else ""
                yield f"{cursor_line}data: {json.dumps(event.public())}\n\n"
    except STREAM_ENDING_ERRORS:
        return
