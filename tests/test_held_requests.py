"""CHATQ_MAX_HELD_REQUESTS_PER_KEY: one key holds at most that many requests open in a web
process. Over it a long-poll is answered at once with the job as it is, and a request that
holds until its job ends (or streams it) gets `429 too_many_held_requests`; another key's
requests are held as before.

A real web (gunicorn, gevent), the module's, and no worker: jobs stay `queued` until the test
cancels them, so that each held request's answer says whether it was held until then."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from chatq import keys
from scripts.localredis import LocalRedis
from tests.batchkit import create_batch, jsonl, request_line, upload
from tests.conftest import Stack, fresh_each_test, start_stack
from tests.procs import ALICE_KEY, BOB_KEY, longpoll_waiters, wait_until
from web.admission.holds import HeldCounts

CAP = 2
CHAT = {"model": "fake", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture(scope="module")
def capped_web(fakellm: str) -> Iterator[Stack]:
    """A web with a cap of CAP held requests per key, no worker, on a Redis of its own."""
    server = LocalRedis().start()
    stack = start_stack(server.url, fakellm, workers=0, CHATQ_MAX_HELD_REQUESTS_PER_KEY=str(CAP))
    yield stack
    stack.stop()
    server.stop()


@pytest.fixture
def capped(capped_web: Stack) -> Iterator[Stack]:
    """The module's capped web, its Redis emptied for the test (each test ends every request
    it held, so that the web's counts are back to none)."""
    yield from fresh_each_test(capped_web)


class Call:
    """One HTTP request made in a thread of its own; `answer` once it is answered."""

    def __init__(self, send: Callable[[], requests.Response]) -> None:
        self.answer: requests.Response | None = None
        self.thread = threading.Thread(target=self._run, args=(send,), daemon=True)
        self.thread.start()

    def _run(self, send: Callable[[], requests.Response]) -> None:
        self.answer = send()

    def result(self) -> requests.Response:
        """The answer (waits for it)."""
        self.thread.join(90)
        assert self.answer is not None, "no answer"
        return self.answer


def _parked(s: Stack, count: int) -> None:
    wait_until(lambda: longpoll_waiters(s.url) == count, 30, f"{count} requests parked")


def _submit(s: Stack, key: str) -> str:
    answer = s.session(key).post(f"{s.url}/v1/jobs", json=CHAT, timeout=30)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def _cancel(s: Stack, job_id: str, key: str) -> None:
    answer = s.session(key).post(f"{s.url}/v1/jobs/{job_id}/cancel", timeout=30)
    assert answer.json()["status"] == "cancelled", answer.text


def _poll(s: Stack, key: str, path: str, **params: Any) -> Call:
    return Call(lambda: s.session(key).get(f"{s.url}{path}", params=params, timeout=90))


def _at_once(s: Stack, call: Call) -> requests.Response:
    """The answer of `call`, which must come without the request being parked (each
    request of the key at its cap is parked already: one more parked is a failure)."""
    parked = longpoll_waiters(s.url)
    wait_until(
        lambda: not call.thread.is_alive() or longpoll_waiters(s.url) > parked,
        60,
        "an answer or a park",
    )
    assert not call.thread.is_alive(), "the request was parked"
    return call.result()


def _background_response(s: Stack) -> str:
    body = {"model": "fake", "input": "hi", "background": True}
    answer = s.session(ALICE_KEY).post(f"{s.url}/v1/responses", json=body, timeout=30)
    assert answer.status_code == 200 and answer.json()["status"] == "queued", answer.text
    return str(answer.json()["id"])


def _alice_at_her_cap(s: Stack) -> tuple[str, list[Call]]:
    job_id = _submit(s, ALICE_KEY)
    polls = [_poll(s, ALICE_KEY, f"/v1/jobs/{job_id}", wait=55) for _ in range(CAP)]
    _parked(s, CAP)
    return job_id, polls


def _jobs_of(s: Stack, owner: str) -> set[str]:
    found = set()
    for key in s.redis.scan_iter(keys.jobs_pattern()):
        if s.redis.hget(key, "owner") == owner:
            found.add(str(s.redis.hget(key, "id")))
    return found


def test_over_the_cap_a_long_poll_is_answered_at_once_and_another_key_still_waits(
    capped: Stack,
) -> None:
    s = capped
    response_id = _background_response(s)
    job_id, polls = _alice_at_her_cap(s)
    path = f"/v1/jobs/{job_id}"
    at_once = [
        _at_once(s, _poll(s, ALICE_KEY, path, wait=55)),
        _at_once(s, _poll(s, ALICE_KEY, path + "/result")),  # its default wait: 25 s
        _at_once(s, _poll(s, ALICE_KEY, path + "/events", wait=55)),
        _at_once(s, _poll(s, ALICE_KEY, f"/v1/responses/{response_id}", wait=55)),
    ]
    assert [a.status_code for a in at_once] == [202, 202, 200, 200]
    assert [a.json()["status"] for a in at_once] == ["queued"] * 4
    for answer in at_once:
        assert "Preference-Applied" not in answer.headers and answer.headers["Retry-After"] == "1"
    # Bob is held as before: his long-poll ends with his job's cancel.
    bob_job = _submit(s, BOB_KEY)
    bob = _poll(s, BOB_KEY, f"/v1/jobs/{bob_job}", wait=55)
    _parked(s, CAP + 1)
    _cancel(s, bob_job, BOB_KEY)
    assert bob.result().json()["status"] == "cancelled"
    assert bob.result().headers["Preference-Applied"] == "wait=55"
    _cancel(s, job_id, ALICE_KEY)
    assert [p.result().json()["status"] for p in polls] == ["cancelled"] * CAP
    # Her slots are free again: her next long-poll is held.
    again = _submit(s, ALICE_KEY)
    held = _poll(s, ALICE_KEY, f"/v1/jobs/{again}", wait=55)
    _parked(s, 1)
    _cancel(s, again, ALICE_KEY)
    assert held.result().json()["status"] == "cancelled"


def _refused(s: Stack, send: Callable[[], requests.Response]) -> requests.Response:
    answer = _at_once(s, Call(send))
    assert answer.status_code == 429, answer.text
    assert answer.json()["error"]["code"] == "too_many_held_requests"
    assert answer.headers["Retry-After"] == "1"
    return answer


def test_over_the_cap_a_held_completion_or_stream_is_429_and_makes_no_job(capped: Stack) -> None:
    s = capped
    response_id = _background_response(s)
    job_id, polls = _alice_at_her_cap(s)
    alice, url = s.session(ALICE_KEY), s.url
    made = _jobs_of(s, "alice")
    sse = {"Accept": "text/event-stream"}
    respond = {"model": "fake", "input": "hi"}
    for send in (
        lambda: alice.post(f"{url}/v1/chat/completions", json=CHAT, timeout=90),
        lambda: alice.post(f"{url}/v1/chat/completions", json={**CHAT, "stream": True}),
        lambda: alice.post(f"{url}/v1/jobs", params={"wait": 30}, json=CHAT, timeout=90),
        lambda: alice.post(f"{url}/v1/responses", json=respond, timeout=90),
        lambda: alice.post(f"{url}/v1/responses", json={**respond, "stream": True}),
        lambda: alice.get(f"{url}/v1/jobs/{job_id}/events", headers=sse, timeout=90),
        lambda: alice.get(f"{url}/v1/responses/{response_id}", params={"stream": "true"}),
        lambda: alice.get(f"{url}/v1/chat/completions/{job_id}", timeout=90),
    ):
        _refused(s, send)
    assert _jobs_of(s, "alice") == made
    # What holds nothing is answered as ever: a background response, a wait of 0.
    background = alice.post(f"{url}/v1/responses", json={**respond, "background": True})
    assert background.status_code == 200 and background.json()["status"] == "queued"
    quick = alice.post(f"{url}/v1/chat/completions", json=CHAT, headers={"Prefer": "wait=0"})
    assert quick.status_code == 202, quick.text
    # Bob's completion is held until his job ends.
    bob_made = _jobs_of(s, "bob")
    bob = Call(lambda: s.session(BOB_KEY).post(f"{url}/v1/chat/completions", json=CHAT))
    _parked(s, CAP + 1)
    (bob_job,) = _jobs_of(s, "bob") - bob_made
    _cancel(s, bob_job, BOB_KEY)
    assert bob.result().status_code == 409 and bob.result().json()["error"]["code"] == (
        "job_cancelled"
    )
    _cancel(s, job_id, ALICE_KEY)
    assert [p.result().json()["status"] for p in polls] == ["cancelled"] * CAP


def test_a_batch_long_poll_over_the_cap_is_answered_at_once(capped: Stack) -> None:
    s = capped
    _, polls = _alice_at_her_cap(s)
    uploaded = upload(s.url, jsonl([request_line("a", "hi")]))
    batch = create_batch(s.url, uploaded.json()["id"]).json()
    answer = _at_once(s, _poll(s, ALICE_KEY, f"/v1/batches/{batch['id']}", wait=55))
    assert answer.status_code == 200 and answer.json()["status"] not in ("completed", "failed")
    assert "Preference-Applied" not in answer.headers
    for job_id in _jobs_of(s, "alice"):
        s.session(ALICE_KEY).post(f"{s.url}/v1/jobs/{job_id}/cancel", timeout=30)
    assert all(p.result().json()["status"] == "cancelled" for p in polls)


def test_counts_stay_within_the_cap_and_come_back() -> None:
    counts = HeldCounts(2)
    assert [counts.take("a"), counts.take("a"), counts.take("a"), counts.take("b")] == [
        True,
        True,
        False,
        True,
    ]
    counts.give("a")
    assert (counts.count("a"), counts.take("a"), counts.take("a")) == (1, True, False)
    for _ in range(3):
        counts.give("a")
    assert counts.count("a") == 0
    uncapped = HeldCounts(0)
    assert all(uncapped.take("a") for _ in range(100))


def test_a_stream_counts_until_it_ends(capped: Stack) -> None:
    s = capped
    job_id = _submit(s, ALICE_KEY)
    sse = {"Accept": "text/event-stream"}
    url = f"{s.url}/v1/jobs/{job_id}/events"
    streams = [
        Call(lambda: s.session(ALICE_KEY).get(url, headers=sse, timeout=90)) for _ in range(CAP)
    ]
    _parked(s, CAP)
    refused = _at_once(s, _poll(s, ALICE_KEY, f"/v1/jobs/{job_id}", wait=55))
    assert refused.status_code == 202 and "Retry-After" in refused.headers
    _cancel(s, job_id, ALICE_KEY)
    for stream in streams:
        assert '"status": "cancelled"' in stream.result().text
    # The streams' slots are free again: her next long-poll is held.
    again = _submit(s, ALICE_KEY)
    held = _poll(s, ALICE_KEY, f"/v1/jobs/{again}", wait=55)
    _parked(s, 1)
    _cancel(s, again, ALICE_KEY)
    assert held.result().json()["status"] == "cancelled"
