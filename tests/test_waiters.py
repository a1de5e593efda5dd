"""The requests parked on jobs (chatq/jobs/waiters.py): each job's waiters woken by its
changes, the ones that left never; under gevent a wait parks on the hub and ends woken or
timed out; a status long-poll whose wait runs out answers the job as it is then."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from flask import Flask
from prometheus_client.parser import text_string_to_metric_families

from chatq.config import settings as config
from chatq.jobs import record as jobs
from chatq.jobs.waiters import Waiter, Waiters
from tests.inproc import in_process
from tests.procs import ALICE_KEY, ROOT, wait_until


def test_a_job_s_waiters_are_woken_and_one_that_left_is_not() -> None:
    waiters = Waiters()
    first, left, last = (Waiter(waiters, "job_a", terminal_only=True) for _ in range(3))
    other = Waiter(waiters, "job_b", terminal_only=True)
    for waiter in (first, left, last, other):
        waiter.__enter__()
    left.__exit__()
    assert waiters.count() == 3
    waiters.wake("job_a", jobs.COMPLETED, "{}")
    assert [w.wait(0) for w in (first, left, last, other)] == [True, False, True, False]
    assert first.snapshot == "{}"
    last.__exit__()
    first.__exit__()
    assert waiters.count() == 1
    waiters.wake("job_a", jobs.COMPLETED)
    assert not first.wait(0)


def test_terminal_only_waiters_sleep_through_progress_and_wake_all_wakes_every_one() -> None:
    waiters = Waiters()
    with Waiter(waiters, "job_a", True) as final, Waiter(waiters, "job_a", False) as each:
        waiters.wake("job_a", jobs.IN_PROGRESS)
        assert (final.wait(0), each.wait(0)) == (False, True)
        waiters.wake_all()
        assert (final.wait(0), each.wait(0)) == (True, True)


# Under gevent (a web process): woken from another greenlet, timed out, woken before it waits.
_GEVENT = """
from gevent import monkey
monkey.patch_all()
import gevent
from chatq.jobs.waiters import Waiter, Waiters

waiters = Waiters()
assert waiters.greenlets
with Waiter(waiters, "job_a", True) as woken, Waiter(waiters, "job_b", True) as idle:
    parked = gevent.spawn(woken.wait, 30)
    gevent.sleep(0)
    waiters.wake("job_a", "completed")
    print(parked.get(timeout=10), idle.wait(0.01))
    waiters.wake("job_b", "completed")
    print(idle.wait(30), idle.wait(0.01))
"""


def test_under_gevent_a_wait_ends_woken_or_timed_out() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _GEVENT], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "True", "False"]


@pytest.fixture
def app(redis_url: str) -> Iterator[Flask]:
    env = {"CHATQ_REDIS_URL": redis_url, "CHATQ_API_KEYS": f"alice:{ALICE_KEY}"}
    with in_process(config.load(env)) as flask_app:
        yield flask_app


def _parked(app: Flask) -> float:
    text = app.test_client().get("/metrics").get_data(as_text=True)
    families = text_string_to_metric_families(text)
    return sum(s.value for f in families for s in f.samples if s.name == "chatq_longpoll_waiters")


def test_a_long_poll_that_times_out_answers_the_job_as_it_is_then(app: Flask) -> None:
    store = app.extensions["chatq"].store
    job_id = jobs.new_job_id()
    record = jobs.new_record(job_id, "alice", "fake", "interactive", {"messages": []}, time.time())
    store.create(record=record, lease_s=60.0)
    answers = []
    poll = threading.Thread(
        target=lambda: answers.append(
            app.test_client().get(
                f"/v1/jobs/{job_id}?wait=2", headers={"Authorization": f"Bearer {ALICE_KEY}"}
            )
        )
    )
    poll.start()
    wait_until(lambda: _parked(app) == 1, 10, "the long-poll parked")
    # Its start wakes no waiter that waits for the end: the answer is read as the wait ends.
    assert store.claim(job_id=job_id, run_id=jobs.new_run_id(), lease_s=60.0).claimed
    poll.join(10)
    assert answers[0].status_code == 202
    assert answers[0].get_json()["status"] == jobs.IN_PROGRESS
