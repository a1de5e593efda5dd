"""runtime.on_fresh_stack: a call on a greenlet of its own, so that a request parked after it
keeps one page of Python stack, not the pages the call's frames reached.

The gevent half runs in a process of its own, monkey-patched as the web is; the pytest
process is not, and there the call runs in place.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from contextvars import ContextVar
from typing import Any

import pytest

from chatq import runtime

PARKED = 2000

# Each of PARKED greenlets makes a call 9 KB deep, two pages past the first of its Python
# stack (as redis-py's reading of a reply reaches past a request's first page), then parks:
# the RSS each adds, with and without on_fresh_stack; and what the call sees and gives back.
SCRIPT = textwrap.dedent(
    """
    from gevent import monkey

    monkey.patch_all()

    import contextvars, json, sys
    import gevent, gevent.event, greenlet
    from chatq.runtime import on_fresh_stack

    PARKED = int(sys.argv[1])
    REQUEST = contextvars.ContextVar("request")
    release = gevent.event.Event()

    def rss_kib():
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) for l in status if l.startswith("VmRSS"))

    def deep(levels):
        a = b = c = d = e = f = 0
        if levels:
            return deep(levels - 1)
        gevent.sleep(0)  # the call blocks, as a read of Redis does
        return greenlet.getcurrent()

    parked = [0]

    def request(fresh):
        (on_fresh_stack if fresh else lambda call, *args: call(*args))(deep, 60)
        parked[0] += 1
        release.wait()

    def until_parked(count):
        while parked[0] < count:
            gevent.sleep(0.01)

    def kib_per_parked(fresh):
        parked[0] = 0
        group = [gevent.spawn(request, fresh) for _ in range(PARKED)]
        until_parked(PARKED)
        before = rss_kib()
        group += [gevent.spawn(request, fresh) for _ in range(PARKED)]
        until_parked(2 * PARKED)
        grown = rss_kib() - before
        release.set()
        gevent.joinall(group)
        release.clear()
        return grown / PARKED

    def failing():
        raise LookupError("no such job")

    def seen():
        found = REQUEST.get("")
        REQUEST.set("changed inside")
        return found

    REQUEST.set("the caller's")
    outcome = {"ran_apart": on_fresh_stack(deep, 0) is not greenlet.getcurrent()}
    try:
        on_fresh_stack(failing)
    except LookupError as error:
        outcome["raised"] = str(error)
    outcome["context"] = on_fresh_stack(seen)
    outcome["context_after"] = REQUEST.get()
    outcome["kwargs"] = on_fresh_stack(dict, a=1)
    kib_per_parked(True)  # the allocator's first growth is nobody's
    outcome["direct_kib"] = kib_per_parked(False)
    outcome["fresh_kib"] = kib_per_parked(True)
    print(json.dumps(outcome))
    """
)


@pytest.fixture(scope="module")
def gevent_run() -> tuple[dict[str, Any], str]:
    """The script's outcome and what it wrote to stderr."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(PARKED)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout), done.stderr


def test_a_parked_greenlet_keeps_a_page_less(gevent_run: tuple[dict[str, Any], str]) -> None:
    outcome, _ = gevent_run
    # Two 4 KiB pages of Python stack less a parked greenlet (12 KiB against 4.5 here), give
    # or take what the finished greenlets leave in the allocator (up to ~2 KiB on busy cores).
    assert outcome["direct_kib"] - outcome["fresh_kib"] > 4, outcome


def test_the_call_runs_apart_and_answers(gevent_run: tuple[dict[str, Any], str]) -> None:
    outcome, _ = gevent_run
    assert outcome["ran_apart"] is True
    assert outcome["kwargs"] == {"a": 1}


def test_its_exception_is_raised_to_the_caller_unreported(
    gevent_run: tuple[dict[str, Any], str],
) -> None:
    outcome, stderr = gevent_run
    assert outcome["raised"] == "no such job"
    # gevent prints a greenlet's failure with its traceback; this one is the caller's to handle.
    assert "Traceback" not in stderr and "LookupError" not in stderr


def test_it_sees_a_copy_of_the_callers_context(gevent_run: tuple[dict[str, Any], str]) -> None:
    outcome, _ = gevent_run
    assert outcome["context"] == "the caller's"
    assert outcome["context_after"] == "the caller's"  # what it set stayed its own


def test_outside_gevent_the_call_runs_in_place() -> None:
    var: ContextVar[str] = ContextVar("var")
    var.set("here")
    assert runtime.on_fresh_stack(threading.get_ident) == threading.get_ident()
    assert runtime.on_fresh_stack(var.get) == "here"
    with pytest.raises(KeyError):
        runtime.on_fresh_stack({}.__getitem__, "missing")
