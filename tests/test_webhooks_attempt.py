"""One webhook attempt and the delivery rules in Redis, in process: an attempt ends at its
deadline whatever the receiver does, any failure is an outcome with a reason, `Retry-After`
is read strictly, and a delivery is taken by one worker at a time, at most the endpoint's cap
at once (a real Redis of the test's own; holds are run out by moving their scores)."""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis

from chatq import keys
from chatq.webhooks.deliveries import Attempt, Deliveries
from chatq.webhooks.events import MAX_ATTEMPTS, Event, new_secret
from chatq.webhooks.store import API, CONFIG, Endpoint
from tests.procs import wait_until
from tests.webhook_receiver import Answer, Receiver, verify
from worker.webhooks.send import Deadline, Sent, retry_after_s, send, session

EVENT = Event("evt_1", "job.completed", 1_700_000_000, "job_1")
RECORD = {"body": EVENT.body(), "event": EVENT.id}
SECRET = new_secret()
KEY_CAP = 100  # more than any of these tests runs: only the endpoints' caps count


@pytest.fixture
def client(own_redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(own_redis_url, decode_responses=True)


def _endpoint(url: str, endpoint_id: str = "wh_1") -> Endpoint:
    return Endpoint(endpoint_id, "alice", url, API, secrets=((SECRET, 0.0),))


def _send_in_thread(url: str, deadline: Deadline) -> tuple[threading.Thread, list[Sent]]:
    sent: list[Sent] = []
    http = session(allow_private=True, pool_size=2)
    thread = threading.Thread(
        target=lambda: sent.append(send(http, _endpoint(url), RECORD, time.time(), deadline)),
        daemon=True,
    )
    thread.start()
    return thread, sent


def test_a_deadline_cuts_an_answer_whose_headers_trickle(receiver: Receiver) -> None:
    receiver.plan("/slow", Answer(trickle=True))
    deadline = Deadline(60.0)
    thread, sent = _send_in_thread(receiver.url("/slow"), deadline)
    receiver.wait_for("/slow", 1)
    deadline.expire()  # what the delivery pool does when the deadline passes
    thread.join(10)
    [result] = sent
    assert (result.outcome, result.status_code) == ("timeout", None)
    assert result.reason == "no answer within 60 s"
    wait_until(lambda: receiver.open_now["/slow"] == 0, 10, "the receiver saw the close")


def test_an_answer_in_time_is_not_cut_by_a_later_expiry(receiver: Receiver) -> None:
    deadline = Deadline(60.0)
    thread, sent = _send_in_thread(receiver.url("/quick"), deadline)
    thread.join(10)
    deadline.expire()
    assert [(s.outcome, s.status_code, s.reason) for s in sent] == [("delivered", 200, None)]
    [answered] = wait_until(lambda: receiver.accepted("/quick"), 10, "the answer written")
    verify(answered, SECRET)


@pytest.mark.parametrize(
    ("url", "outcome"),
    [
        ("http://" + "a" * 64 + ".example.com/hook", "invalid_url"),  # a label over 63
        ("http://" + "ä" * 64 + ".example.com/hook", "invalid_url"),
        ("http://127.0.0.1:1/hook", "connection_error"),
    ],
)
def test_a_url_that_cannot_be_reached_is_an_outcome_never_an_exception(
    url: str, outcome: str
) -> None:
    result = send(session(True, 2), _endpoint(url), RECORD, 1e9, Deadline(5.0))
    assert result.outcome == outcome and result.reason and result.status_code is None


def test_an_exception_of_any_kind_is_an_internal_error_with_its_type() -> None:
    broken = Endpoint("wh_1", "alice", "http://127.0.0.1:1/", API, secrets=(("whsec_a", 0.0),))
    result = send(session(True, 2), broken, RECORD, 1e9, Deadline(5.0))
    assert (result.outcome, result.reason) == ("internal_error", "the attempt failed: Error")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("²", None),
        ("١٢", None),  # Arabic-Indic digits
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        (None, None),
        ("Thu, 01 Jan 1970 00:00:05 GMT", 0.0),
        ("Thu, 01 Jan 1970 00:01:40 GMT", 90.0),
    ],
)
def test_retry_after_is_ascii_digits_or_an_http_date(
    value: str | None, seconds: float | None
) -> None:
    assert retry_after_s(value, now_s=10.0) == seconds


def _deliveries(client: redis.Redis, hold_s: float = 20.0) -> Deliveries:
    return Deliveries(client, 3600, hold_s)


def _add(deliveries: Deliveries, delivery_id: str, endpoint_id: str, owner: str = "alice") -> None:
    endpoint = Endpoint(endpoint_id, owner, "https://hooks.example.com/", CONFIG)
    assert deliveries.add(delivery_id, endpoint, EVENT)


def _run_out_holds(client: redis.Redis) -> None:
    """Every hold ends now, as it would once its time passed."""
    indexes = (keys.webhooks_waiting(), keys.webhooks_key_waiting())
    for key in (keys.webhooks_due(), keys.webhooks_running(), *indexes):
        members: list[str] = client.zrange(key, 0, -1)  # type: ignore[assignment]
        for member in members:
            client.zadd(key, {member: 1})
    for pattern in (keys.webhooks_busy("*"), keys.webhooks_key_busy("*")):
        for key in client.scan_iter(pattern):
            client.delete(key)


def test_an_endpoint_at_its_cap_is_passed_over_for_the_others(client: redis.Redis) -> None:
    deliveries = _deliveries(client)
    for n in range(3):
        _add(deliveries, f"dlv_a{n}", "wh_a")
    _add(deliveries, "dlv_b0", "wh_b")
    first = deliveries.take(limit=10, endpoint_cap=2, key_cap=KEY_CAP)
    assert [d for d, _ in first] == ["dlv_a0", "dlv_a1", "dlv_b0"]
    # Another worker: the endpoint's cap counts every worker's attempts.
    assert _deliveries(client).take(limit=10, endpoint_cap=2, key_cap=KEY_CAP) == []
    started = deliveries.begin(*first[0])
    assert started is not None
    done = Attempt("delivered", "delivered", 200, started.now_s, 0.1)
    assert client.zrange(keys.webhooks_waiting("wh_a"), 0, -1) == ["dlv_a2"]
    assert deliveries.finish(*first[0], done)  # its slot goes to the one waiting
    assert [d for d, _ in _deliveries(client).take(10, 2, KEY_CAP)] == ["dlv_a2"]
    assert client.exists(keys.webhooks_waiting("wh_a"), keys.webhooks_waiting()) == 0


def test_a_lost_worker_s_slot_at_a_capped_endpoint_frees_up_when_its_hold_runs_out(
    client: redis.Redis,
) -> None:
    deliveries = _deliveries(client)
    for n in range(3):
        _add(deliveries, f"dlv_{n}", "wh_1")
    [first] = deliveries.take(10, endpoint_cap=1, key_cap=KEY_CAP)
    assert deliveries.begin(*first) is not None
    assert deliveries.take(10, 1, KEY_CAP) == []  # the other two wait for the endpoint's slot
    _run_out_holds(client)  # the worker was lost mid-attempt
    [again] = deliveries.take(10, 1, KEY_CAP)  # the lost one first: due since its hold ran out
    assert (first[0], again[0]) == ("dlv_0", "dlv_0") and again[1] != first[1]
    assert client.zrange(keys.webhooks_waiting("wh_1"), 0, -1) == ["dlv_1", "dlv_2"]


def test_a_delivery_is_taken_again_only_once_its_hold_runs_out_and_the_lost_attempt_is_logged(
    client: redis.Redis,
) -> None:
    deliveries = _deliveries(client)
    _add(deliveries, "dlv_1", "wh_1")
    [(dlv, token)] = deliveries.take(10, 2, KEY_CAP)
    assert deliveries.begin(dlv, token) is not None
    assert deliveries.renew([(dlv, token)]) == {dlv}
    assert deliveries.take(10, 2, KEY_CAP) == []  # held while its attempt runs
    _run_out_holds(client)  # the worker was lost: it renews no more
    [(again, second)] = deliveries.take(10, 2, KEY_CAP)
    assert (again, deliveries.renew([(dlv, token)])) == (dlv, set())
    assert deliveries.begin(dlv, token) is None  # the lost worker's token is stale
    started = deliveries.begin(again, second)
    assert started is not None
    outcomes = [a["outcome"] for a in _attempts(deliveries, dlv)]
    assert outcomes == ["lost", "in_progress"]
    failed = Attempt("pending", "http_error", 500, started.now_s, 0.1, 60.0, "answered 500")
    assert deliveries.finish(again, second, failed)
    assert [a["outcome"] for a in _attempts(deliveries, dlv)] == ["lost", "http_error"]
    assert client.zcard(keys.webhooks_running()) == 0


def test_a_delivery_whose_attempts_all_were_lost_fails_after_the_last(
    client: redis.Redis,
) -> None:
    deliveries = _deliveries(client)
    _add(deliveries, "dlv_1", "wh_1")
    for _ in range(MAX_ATTEMPTS):
        [taken] = deliveries.take(10, 2, KEY_CAP)
        assert deliveries.begin(*taken) is not None
        _run_out_holds(client)
    [taken] = deliveries.take(10, 2, KEY_CAP)
    assert deliveries.begin(*taken) is None
    record = deliveries.get("dlv_1") or {}
    assert record["status"] == "failed" and client.zscore(keys.webhooks_due(), "dlv_1") is None
    assert [a["outcome"] for a in _attempts(deliveries, "dlv_1")] == ["lost"] * MAX_ATTEMPTS


def _attempts(deliveries: Deliveries, delivery_id: str) -> list[dict[str, object]]:
    record = deliveries.get(delivery_id) or {}
    loaded: list[dict[str, object]] = json.loads(record.get("attempts") or "[]")
    return loaded
