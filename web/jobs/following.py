"""Following a job's events from a cursor: a long-poll's one page, or a stream's pages.

A follower stays registered with the listener for as long as it follows, so that it misses
no notification between pages, and reads the job's event stream only when it may be behind:
at first, after a full page or a silent one, and when the deltas the notifications carried
(chatq/jobs/append.lua) do not continue its cursor. Streaming text, a woken follower answers
from the notification alone.
"""

from __future__ import annotations

from chatq import jobs, keys
from chatq.errors import job_not_found
from chatq.jobs import Event, Waiter, continuing, parse_events
from web.context import Services
from web.jobs.waiting import Hold, before_park, wait_ready

PAGE_EVENTS = 500


def read_events(
    svc: Services, job_id: str, cursor: str, owner: str = ""
) -> tuple[list[Event], str, bool]:
    """The events after `cursor` (one page), the job's status and whether the page is full,
    in one round trip; 404 when there is no such job, or (given an `owner`) not theirs.

    The status is read first: an end written between the two reads is in the page (the
    status is then the end's), and a final status never comes without its end, unless the
    page is full."""
    pipe = svc.redis.pipeline(transaction=False)
    pipe.hmget(keys.job(job_id), "status", "owner")
    pipe.xrange(keys.events(job_id), min=f"({cursor}", count=PAGE_EVENTS)
    (status, job_owner), rows = pipe.execute()
    if status is None or (owner and job_owner != owner):
        raise job_not_found()
    events = parse_events(rows)
    if events and events[-1].type == "end":
        status = events[-1].value
    return events, status, len(rows) == PAGE_EVENTS


def _has_news(found: tuple[list[Event], str]) -> bool:
    return bool(found[0]) or jobs.is_terminal(found[1])


class Follower:
    """One request following job `waiter.job_id` from `cursor`; `waiter` (not terminal-only)
    registered before its first page. `owner`, when given, is checked at each read."""

    def __init__(self, svc: Services, waiter: Waiter, cursor: str, owner: str = "") -> None:
        self.svc = svc
        self.waiter = waiter
        self.cursor = cursor
        self.owner = owner
        self.status = ""
        self._behind = True  # the stream may hold events no notification will announce
        self._watching = False

    def _read(self) -> list[Event]:
        events, self.status, self._behind = read_events(
            self.svc, self.waiter.job_id, self.cursor, self.owner
        )
        return events

    def _woken(self, _: Waiter | None) -> tuple[list[Event], str]:
        carried, self.waiter.carried = self.waiter.carried, None
        events = continuing(carried, self.cursor) if carried else None
        return (self._read() if events is None else events), self.status

    def _first(self, parks: bool) -> tuple[list[Event], str]:
        """What the page starts from: the stream read if the follower may be behind; its
        Redis calls `before_park` when the page `parks` if it finds nothing."""
        found = (before_park(parks, self._read) if self._behind else []), self.status
        if not _has_news(found) and self.status == jobs.QUEUED and not self._watching:
            # About to wait for a queued job: its claim must tell us it started. Claimed
            # since the read (nothing to watch): the start may be unannounced, read again.
            self._watching = before_park(parks, self.svc.store.watch, job_id=self.waiter.job_id)
            if not self._watching:
                found = before_park(parks, self._read), self.status
        return found

    def page(self, hold: Hold) -> list[Event]:
        """The next events: at once if there are any, else as soon as there are, or the job
        has ended, or the hold ends ([])."""
        found = self._first(hold.timeout_s > 0)
        if hold.timeout_s > 0 and not _has_news(found):
            found = wait_ready(self.svc, self.waiter, found, self._woken, _has_news, hold)
        events = found[0]
        if events:
            self.cursor = events[-1].id
        else:
            # Silent for the whole hold: the next page reads, in case a change went unheard.
            self._behind = True
        return events


def poll(
    svc: Services, job_id: str, owner: str, cursor: str, timeout_s: float
) -> tuple[list[Event], str]:
    """A long-poll's page of `owner`'s job (404 if not theirs) and the job's status: events
    after `cursor` as soon as there is one, or the job has ended, or `timeout_s` is up."""
    if timeout_s <= 0 or svc.listener.stops(False):
        events, status, _ = read_events(svc, job_id, cursor, owner)
        return events, status
    with svc.listener.waiting(job_id, terminal_only=False) as waiter:
        follower = Follower(svc, waiter, cursor, owner)
        return follower.page(Hold(timeout_s, terminal_only=False)), follower.status
