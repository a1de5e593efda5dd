"""Long-polling: park a request until its job changes, woken by the notification listener."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import msgspec

from chatq import jobs, runtime
from chatq.errors import job_not_found
from chatq.jobs import Waiter
from web import metrics, tracing
from web.context import Services
from web.http import jittered

T = TypeVar("T")


def load_owned(svc: Services, job_id: str, owner: str) -> dict[str, str]:
    """The job's record if it exists and belongs to `owner`; otherwise 404."""
    record = svc.store.get(job_id)
    if record is None or record.get("owner") != owner:
        raise job_not_found()
    return record


@dataclass(frozen=True, slots=True)
class Hold:
    """How long a request waits: `timeout_s`, and whether it holds on through a drain."""

    timeout_s: float
    through_drain: bool = False
    terminal_only: bool = True


def before_park(parks: bool, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`call(*args, **kwargs)`, a request's last Redis call before it `parks`: then on a stack
    of its own (runtime.on_fresh_stack), so that the parked request keeps one page of stack
    instead of the two redis-py's reply reading reaches."""
    if not parks:
        return call(*args, **kwargs)
    return runtime.on_fresh_stack(call, *args, **kwargs)


def _park(
    svc: Services,
    job_id: str,
    value: T,
    read: Callable[[Waiter | None], T],
    ready: Callable[[T], bool],
    hold: Hold,
) -> T:
    """`value` once ready; until then wait for notifications on `job_id` and re-read."""
    if hold.timeout_s <= 0 or ready(value) or svc.listener.stops(hold.through_drain):
        return value
    with svc.listener.waiting(job_id, hold.terminal_only) as waiter:
        # Re-read after registering: a change in between is seen here or wakes us.
        return wait_ready(svc, waiter, runtime.on_fresh_stack(read, None), read, ready, hold)


def wait_ready(
    svc: Services,
    waiter: Waiter,
    value: T,
    read: Callable[[Waiter | None], T],
    ready: Callable[[T], bool],
    hold: Hold,
) -> T:
    """`value`, read after `waiter` was registered, once ready or when the hold ends."""
    if ready(value):
        return value
    woken = _read_on_wakes(svc, waiter, read, ready, hold, keep_reads=True)
    return value if woken is None else woken


def _read_on_wakes(
    svc: Services,
    waiter: Waiter,
    read: Callable[[Waiter | None], T],
    ready: Callable[[T], bool],
    hold: Hold,
    keep_reads: bool,
) -> T | None:
    """Wait on `waiter`, reading after each wake, until what is read is ready or the hold
    ends: the last read, or None when nothing woke it (or, without `keep_reads`, when it
    waited again since: what it read is not held while it is parked)."""
    listener = svc.listener
    deadline = time.monotonic() + hold.timeout_s
    value = None
    # try/finally rather than context managers: each `with` would keep a bound method, and a
    # generator's its frame, for as long as the request is parked.
    poll = tracing.long_poll(waiter.job_id)
    metrics.WAITERS.inc()
    try:
        while not listener.stops(hold.through_drain):
            remaining_s = min(deadline, listener.hold_until) - time.monotonic()
            if remaining_s <= 0:
                break
            if not keep_reads:
                value = None
            if waiter.wait(remaining_s):
                poll.woke()
                value = read(waiter)
                if ready(value):
                    break
    finally:
        metrics.WAITERS.dec()
        poll.end()
    return value


def _final(svc: Services, job_id: str, owner: str, waiter: Waiter | None) -> dict[str, str]:
    """The record the last notification carried, else the one in Redis."""
    if waiter is not None and waiter.snapshot:
        record: dict[str, str] = msgspec.json.decode(waiter.snapshot)
        if record.get("owner") == owner:
            return record
    return load_owned(svc, job_id, owner)


def _terminal(record: dict[str, str]) -> bool:
    return jobs.is_terminal(record["status"])


@contextmanager
def watching(svc: Services, job_id: str, wait_s: float) -> Iterator[Waiter | None]:
    """Before creating job `job_id`, when the request will wait for it: its waiter, so that
    the wait needs no second read (no change of a job can come before its creation)."""
    if wait_s <= 0:
        yield None
        return
    with svc.listener.waiting(job_id, terminal_only=True) as waiter:
        yield waiter


def wait_terminal(
    svc: Services,
    record: dict[str, str],
    wait_s: float,
    through_drain: bool = False,
    waiter: Waiter | None = None,
) -> dict[str, str]:
    """The record once terminal, or as it is when `wait_s` (jittered) runs out; `waiter`,
    registered before `record` was read or created, spares a second read."""
    job_id, owner = record["id"], record["owner"]
    if wait_s <= 0 or _terminal(record):
        return record
    hold = Hold(jittered(wait_s), through_drain)
    final = partial(_final, svc, job_id, owner)
    if waiter is None or waiter.job_id != job_id:
        # `record` was just read by the caller: reading it again here would cost a round trip.
        return _park(svc, job_id, record, final, _terminal, hold)
    # A parked request does not hold the record (a tenth of its memory): when no wake
    # brought a newer one, the job is read again as the wait ends.
    del record
    woken = _read_on_wakes(svc, waiter, final, _terminal, hold, keep_reads=False)
    return final(waiter) if woken is None else woken


def wait_owned(svc: Services, job_id: str, owner: str, wait_s: float) -> dict[str, str]:
    """The owner's job (else 404) once terminal, or when `wait_s` (jittered) runs out: read
    once after registering to be woken, and once more if it times out."""
    if wait_s <= 0 or svc.listener.stops(False):
        return load_owned(svc, job_id, owner)
    with svc.listener.waiting(job_id, terminal_only=True) as waiter:
        # Passed on, not named: a local would hold the record for as long as it is parked.
        return wait_terminal(
            svc, runtime.on_fresh_stack(load_owned, svc, job_id, owner), wait_s, waiter=waiter
        )
