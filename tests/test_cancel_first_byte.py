"""A cancel reaches a job still waiting for the upstream's first byte, under both worker pools:
the worker cuts the call's connection at its next monitor tick (fakellm sees it closed) rather
than waiting out CHATQ_UPSTREAM_FIRST_BYTE_TIMEOUT, its slot is free again, and the cut
connection never serves another call; a first byte that never comes is still
`upstream_timeout`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from tests.batchkit import own_stack
from tests.conftest import Stack
from tests.procs import wait_until

pytestmark = pytest.mark.long

POOLS = ["gevent", "threads"]
# Far longer than any wait below: a call that is not cut stays open all through the test.
LONG_FIRST_BYTE_S = "600"


@pytest.fixture(scope="module")
def one_slot_stacks() -> Iterator[Callable[[str], tuple[Stack, str]]]:
    """A stack per pool, started at its first use and kept to the module's end: a module
    fixture with the pools as its params would be started again each time the tests'
    random order went from one pool to the other."""
    with contextlib.ExitStack() as started:
        stacks: dict[str, tuple[Stack, str]] = {}

        def of(pool: str) -> tuple[Stack, str]:
            if pool not in stacks:
                stacks[pool] = started.enter_context(
                    own_stack(
                        CHATQ_WORKER_POOL=pool,
                        CHATQ_WORKER_CONCURRENCY="1",
                        CHATQ_UPSTREAM_FIRST_BYTE_TIMEOUT=LONG_FIRST_BYTE_S,
                        CHATQ_JOB_TIMEOUT="900",
                    )
                )
            return stacks[pool]

        yield of


@pytest.fixture(params=POOLS)
def one_slot(
    request: pytest.FixtureRequest, one_slot_stacks: Callable[[str], tuple[Stack, str]]
) -> tuple[Stack, str]:
    """A worker of one slot under each pool, on a Redis and a fakellm of its own."""
    return one_slot_stacks(request.param)


# One connection of the test's own, kept alive: reading /stats opens none of its own.
_STATS = requests.Session()


def _stats(upstream: str) -> dict[str, int]:
    return dict(_STATS.get(upstream.removesuffix("/v1") + "/stats", timeout=5).json())


def _job(stack: Stack, job_id: str, **params: Any) -> dict[str, Any]:
    return dict(stack.get(job_id, **params).json())


def test_a_cancel_cuts_a_call_waiting_for_its_first_byte(one_slot: tuple[Stack, str]) -> None:
    stack, upstream = one_slot
    before = _stats(upstream)
    job_id = stack.submit("never answered", model="fake:hang=1").json()["id"]
    wait_until(
        lambda: _stats(upstream)["requests"] > before["requests"],
        30,
        "the upstream to receive the call",
    )
    assert _job(stack, job_id)["status"] == "in_progress"
    open_during = _stats(upstream)["connections_active"]
    assert open_during >= 1
    cancelled = stack.session().post(f"{stack.url}/v1/jobs/{job_id}/cancel", timeout=10)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    # The upstream sees the connection closed: the worker cut it rather than wait its 600 s.
    wait_until(
        lambda: _stats(upstream)["connections_active"] < open_during,
        30,
        "the upstream to see the connection closed",
    )
    worker = stack.procs[0]
    wait_until(
        lambda: f"job {job_id} stopped (cancelled)" in worker.log_text(),
        30,
        "the worker to stop the job",
    )
    assert _job(stack, job_id)["status"] == "cancelled"
    # The one slot is free again: the next job runs now, on a connection that works.
    after = stack.submit("next in line", wait=30).json()
    assert after["status"] == "completed" and after["attempts"] == 1, after


def test_a_cut_connection_never_goes_back_to_the_pool(one_slot: tuple[Stack, str]) -> None:
    stack, upstream = one_slot
    assert stack.submit("warm the pool", wait=30).json()["status"] == "completed"
    before = _stats(upstream)
    # The hanging call takes the pooled connection; the cancel cuts it.
    job_id = stack.submit("hang on the pooled one", model="fake:hang=1").json()["id"]
    wait_until(
        lambda: _stats(upstream)["requests"] > before["requests"],
        30,
        "the upstream to receive the call",
    )
    stack.session().post(f"{stack.url}/v1/jobs/{job_id}/cancel", timeout=10)
    wait_until(
        lambda: f"job {job_id} stopped (cancelled)" in stack.procs[0].log_text(),
        30,
        "the worker to stop the job",
    )
    cut = _stats(upstream)
    jobs = [stack.submit(f"after the cut {i}", wait=30).json() for i in range(4)]
    # Each completed at its first attempt: none was sent on the cut connection.
    assert [(j["status"], j["attempts"]) for j in jobs] == [("completed", 1)] * 4, jobs
    # One new connection replaces the cut one, and is reused by the calls after it.
    assert _stats(upstream)["connections_opened"] - cut["connections_opened"] == 1


@pytest.mark.parametrize("pool", POOLS)
def test_a_first_byte_that_never_comes_is_still_an_upstream_timeout(pool: str) -> None:
    with own_stack(
        CHATQ_WORKER_POOL=pool,
        CHATQ_UPSTREAM_FIRST_BYTE_TIMEOUT="1",
        CHATQ_UPSTREAM_MAX_ATTEMPTS="1",
    ) as (stack, _):
        job = stack.submit("stalled", model="fake:hang=1", wait=30).json()
        assert job["status"] == "failed" and job["attempts"] == 1, job
        assert job["error"]["code"] == "upstream_timeout"
        assert job["error"]["message"] == "The upstream did not answer in time"
