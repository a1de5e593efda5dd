"""Webhooks end to end: a real web and worker on a Redis of their own, and a receiver that
verifies every delivery with the standardwebhooks package and the openai SDK."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import requests
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from chatq import keys
from chatq.jobs import record as jobs
from chatq.jobs.store import Store
from chatq.webhooks.events import new_secret
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, BOB_KEY, outbox_length, wait_until
from tests.webhook_receiver import Answer, Receiver, refuse, verify
from web.openapi.document import document

CONFIG_SECRETS = (new_secret(), new_secret())


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def hooks(fakellm: str, receiver: Receiver) -> Iterator[Stack]:
    """A stack on a Redis of its own (no other worker takes its deliveries), retries 1,000
    times faster than the spec's schedule, and one endpoint of alice's from configuration."""
    server = LocalRedis().start()
    configured = f"alice={receiver.url('/config')}#{'#'.join(CONFIG_SECRETS)}"
    s = start_stack(
        server.url,
        fakellm,
        CHATQ_WEBHOOK_ALLOW_PRIVATE="1",
        CHATQ_WEBHOOK_RETRY_SCALE="0.001",
        CHATQ_WEBHOOK_TIMEOUT="1",
        CHATQ_WEBHOOKS=configured,
    )
    yield s
    s.stop()
    server.stop()


def _create(stack: Stack, url: str, key: str = ALICE_KEY, **fields: Any) -> dict[str, Any]:
    answer = stack.session(key).post(
        f"{stack.url}/v1/webhooks", json={"url": url, **fields}, timeout=10
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _job(stack: Stack, hook: str | None, key: str = ALICE_KEY, **body: Any) -> str:
    headers = {"Chatq-Webhook": hook} if hook else {}
    payload = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], **body}
    answer = stack.session(key).post(
        f"{stack.url}/v1/jobs?wait=30", json=payload, headers=headers, timeout=40
    )
    assert answer.status_code == 200, answer.text
    job_id: str = answer.json()["id"]
    return job_id


def _log(stack: Stack, endpoint_id: str, key: str = ALICE_KEY) -> list[dict[str, Any]]:
    answer = stack.session(key).get(f"{stack.url}/v1/webhooks/{endpoint_id}/deliveries", timeout=10)
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


def _settled(
    stack: Stack, endpoint_id: str, count: int = 1, key: str = ALICE_KEY
) -> list[dict[str, Any]]:
    """The log once `count` deliveries have ended (delivered or failed for good)."""

    def done() -> list[dict[str, Any]] | None:
        log = _log(stack, endpoint_id, key)
        return log if sum(d["status"] != "pending" for d in log) >= count else None

    result: list[dict[str, Any]] = wait_until(done, 30, "deliveries settled", every_s=0.2)
    return result


def _outbox_drained(stack: Stack) -> None:
    wait_until(lambda: outbox_length(stack.redis) == 0, 20, "the outbox handled")


def _valid(name: str, value: Any) -> None:
    """`value` matches the component schema `name` of /openapi.json."""
    doc = document()
    resource = Resource.from_contents(doc, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:doc", resource)
    Draft202012Validator(
        {"$ref": f"urn:doc#/components/schemas/{name}"}, registry=registry
    ).validate(value)


def _worker_metrics(stack: Stack) -> str:
    bind = stack.procs[0].env["CHATQ_WORKER_METRICS_BIND"]
    return requests.get(f"http://{bind}/metrics", timeout=5).text


def test_a_key_s_endpoint_hears_of_its_job_verified_by_both_libraries(
    hooks: Stack, receiver: Receiver
) -> None:
    endpoint = _create(hooks, receiver.url("/bob"), key=BOB_KEY)
    job_id = _job(hooks, None, key=BOB_KEY)
    [got] = receiver.wait_for("/bob", 1)
    event = verify(got, endpoint["signing_secret"])
    assert (event.type, event.data.id) == ("job.completed", job_id)
    [delivery] = _settled(hooks, endpoint["id"], key=BOB_KEY)
    assert delivery["status"] == "delivered" and delivery["event"]["id"] == event.id
    assert [(a["outcome"], a["status_code"]) for a in delivery["attempts"]] == [("delivered", 200)]
    listed = hooks.session(BOB_KEY).get(f"{hooks.url}/v1/webhooks", timeout=10).json()
    assert endpoint["id"] in [e["id"] for e in listed["data"]]
    _valid("WebhookEndpointWithSecret", endpoint)
    _valid("WebhookEndpointList", listed)
    _valid("WebhookDelivery", delivery)
    _valid("WebhookEvent", json.loads(got.body))
    assert re.search(
        r'chatq_webhook_attempts_total\{outcome="delivered"\} [1-9]', _worker_metrics(hooks)
    )


def test_a_stale_timestamp_or_a_wrong_secret_fails_verification(
    hooks: Stack, receiver: Receiver
) -> None:
    endpoint = _create(hooks, receiver.url("/stale"))
    _job(hooks, endpoint["id"])
    [got] = receiver.wait_for("/stale", 1)
    secret = endpoint["signing_secret"]
    verify(got, secret)
    stale = replace(
        got,
        headers={
            **got.headers,
            "webhook-timestamp": str(int(got.headers["webhook-timestamp"]) - 600),
        },
    )
    refuse(stale, secret, "too old")
    refuse(got, new_secret(), "signature")


def test_500_twice_then_200_gets_exactly_one_accepted_delivery(
    hooks: Stack, receiver: Receiver
) -> None:
    receiver.plan("/flaky", Answer(500), Answer(500), Answer(200))
    endpoint = _create(hooks, receiver.url("/flaky"))
    _job(hooks, endpoint["id"])
    [delivery] = _settled(hooks, endpoint["id"])
    assert [a["status_code"] for a in delivery["attempts"]] == [500, 500, 200]
    assert delivery["status"] == "delivered"
    got = receiver.at("/flaky")
    assert len(got) == 3 and len({g.headers["webhook-id"] for g in got}) == 1
    assert len(receiver.accepted("/flaky")) == 1
    verify(receiver.accepted("/flaky")[0], endpoint["signing_secret"])


def test_410_disables_the_endpoint(hooks: Stack, receiver: Receiver) -> None:
    receiver.plan("/gone", Answer(410))
    endpoint = _create(hooks, receiver.url("/gone"))
    _job(hooks, endpoint["id"])
    [delivery] = _settled(hooks, endpoint["id"])
    assert delivery["status"] == "failed" and len(delivery["attempts"]) == 1
    shown = hooks.session().get(f"{hooks.url}/v1/webhooks/{endpoint['id']}", timeout=10).json()
    assert shown["status"] == "disabled" and "410" in shown["disabled_reason"]
    _job(hooks, endpoint["id"])
    _outbox_drained(hooks)
    assert len(_log(hooks, endpoint["id"])) == 1 and len(receiver.at("/gone")) == 1


def test_a_redirect_is_a_failure_and_is_not_followed(hooks: Stack, receiver: Receiver) -> None:
    receiver.plan("/moved", Answer(302, {"Location": receiver.url("/elsewhere")}), Answer(200))
    endpoint = _create(hooks, receiver.url("/moved"))
    _job(hooks, endpoint["id"])
    [delivery] = _settled(hooks, endpoint["id"])
    assert [(a["outcome"], a["status_code"]) for a in delivery["attempts"]] == [
        ("redirect", 302),
        ("delivered", 200),
    ]
    assert receiver.at("/elsewhere") == []


def test_retry_after_is_honoured(hooks: Stack, receiver: Receiver) -> None:
    receiver.plan("/busy", Answer(503, {"Retry-After": "2"}), Answer(200))
    endpoint = _create(hooks, receiver.url("/busy"))
    _job(hooks, endpoint["id"])
    [delivery] = _settled(hooks, endpoint["id"])
    first, second = delivery["attempts"]
    assert (first["status_code"], second["status_code"]) == (503, 200)
    # The schedule alone (5 s at a thousandth) would have retried well within a second.
    assert second["attempted_at"] - first["attempted_at"] >= 2
    got = receiver.at("/busy")
    assert got[1].at_s - got[0].at_s >= 2 - 0.01


def test_a_retry_after_not_in_ascii_digits_is_a_recorded_failure_then_a_retry(
    hooks: Stack, receiver: Receiver
) -> None:
    receiver.plan("/superscript", Answer(503, {"Retry-After": "²"}), Answer(200))
    endpoint = _create(hooks, receiver.url("/superscript"))
    _job(hooks, endpoint["id"])
    [delivery] = _settled(hooks, endpoint["id"])
    assert [(a["outcome"], a["status_code"]) for a in delivery["attempts"]] == [
        ("http_error", 503),
        ("delivered", 200),
    ]
    assert delivery["attempts"][0]["reason"] == "the receiver answered 503"


def test_a_url_stored_before_its_checks_is_one_failed_attempt_with_a_reason(
    hooks: Stack, receiver: Receiver
) -> None:
    endpoint = _create(hooks, receiver.url("/valid-then"))
    # As an endpoint made before names were checked at creation: a DNS label over 63.
    long_label = "http://" + "a" * 64 + ".example.com/hook"
    hooks.redis.hset(keys.webhook(endpoint["id"]), "url", long_label)
    _job(hooks, endpoint["id"])
    [delivery] = _settled(hooks, endpoint["id"])
    [attempt] = delivery["attempts"]
    assert (delivery["status"], attempt["outcome"], attempt["status_code"]) == (
        "failed",
        "invalid_url",
        None,
    )
    assert "not a valid name" in attempt["reason"]
    _valid("WebhookDelivery", delivery)
    assert not any("LocationParseError" in proc.log_text() for proc in hooks.procs)


def test_a_delivery_is_replayed_with_the_same_webhook_id(hooks: Stack, receiver: Receiver) -> None:
    endpoint = _create(hooks, receiver.url("/replay"))
    _job(hooks, endpoint["id"])
    [first] = _settled(hooks, endpoint["id"])
    url = f"{hooks.url}/v1/webhooks/{endpoint['id']}/deliveries/{first['id']}/replay"
    answer = hooks.session().post(url, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.json()["replay_of"] == first["id"]
    got = receiver.wait_for("/replay", 2)
    assert got[0].headers["webhook-id"] == got[1].headers["webhook-id"]
    verify(got[1], endpoint["signing_secret"])
    assert len(_settled(hooks, endpoint["id"], 2)) == 2
    foreign = hooks.session(BOB_KEY).post(url, timeout=10)
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "webhook_not_found"


def test_a_job_names_one_endpoint_or_none(hooks: Stack, receiver: Receiver) -> None:
    chosen = _create(hooks, receiver.url("/chosen"))
    other = _create(hooks, receiver.url("/other"))
    job_id = _job(hooks, chosen["id"])
    [got] = receiver.wait_for("/chosen", 1)
    assert verify(got, chosen["signing_secret"]).data.id == job_id
    quiet = _job(hooks, "none")
    assert hooks.redis.hget(keys.job(quiet), "announce") is None
    _outbox_drained(hooks)
    assert receiver.at("/other") == [] and _log(hooks, other["id"]) == []
    bobs = _create(hooks, receiver.url("/bobs"), key=BOB_KEY)
    for named in ("wh_nonexistent", bobs["id"]):
        answer = hooks.session().post(
            f"{hooks.url}/v1/jobs",
            headers={"Chatq-Webhook": named},
            json={"messages": [{"role": "user", "content": "x"}]},
            timeout=10,
        )
        assert answer.status_code == 400
        assert answer.json()["error"] | {"message": ""} == {
            "message": "",
            "type": "invalid_request_error",
            "param": "Chatq-Webhook",
            "code": "webhook_not_found",
        }


def test_an_answer_from_the_cache_is_announced_too(hooks: Stack, receiver: Receiver) -> None:
    endpoint = _create(hooks, receiver.url("/cached"))
    first = _job(
        hooks,
        endpoint["id"],
        temperature=0,
        messages=[{"role": "user", "content": "cache me for webhooks"}],
    )
    second = _job(
        hooks,
        endpoint["id"],
        temperature=0,
        messages=[{"role": "user", "content": "cache me for webhooks"}],
    )
    assert hooks.redis.hget(keys.job(second), "cached") == "1"
    got = receiver.wait_for("/cached", 2)
    ids = {verify(g, endpoint["signing_secret"]).data.id for g in got}
    assert ids == {first, second}


@pytest.mark.parametrize(
    ("status", "finish_reason", "expected"),
    [
        (jobs.COMPLETED, "stop", "response.completed"),
        (jobs.COMPLETED, "length", "response.incomplete"),
        (jobs.FAILED, "error", "response.failed"),
    ],
)
def test_a_response_s_end_is_a_response_event(
    hooks: Stack, receiver: Receiver, status: str, finish_reason: str, expected: str
) -> None:
    path = f"/responses-{finish_reason}"
    endpoint = _create(hooks, receiver.url(path))
    store = Store(hooks.redis, job_ttl_s=600)
    job_id = jobs.new_job_id()
    record = jobs.new_record(job_id, "alice", "fake", "interactive", {}, 0.0)
    store.create(
        record={**record, "api": "responses", "announce": "1", "webhook": endpoint["id"]},
        lease_s=30,
    )
    assert store.claim(job_id=job_id, run_id="r", lease_s=30).claimed
    store.finish(
        job_id=job_id,
        run_id="r",
        status=status,
        fields={"finish_reason": finish_reason},
        finish_reason=finish_reason,
    )
    [got] = receiver.wait_for(path, 1)
    event = verify(got, endpoint["signing_secret"])
    assert (event.type, event.data.id) == (expected, "resp_" + job_id.removeprefix("job_"))
    assert type(event).__name__ == "Response" + expected.split(".")[1].title() + "WebhookEvent"


def test_a_configured_endpoint_signs_with_each_of_its_secrets(
    hooks: Stack, receiver: Receiver
) -> None:
    listed = hooks.session().get(f"{hooks.url}/v1/webhooks", timeout=10).json()["data"]
    [configured] = [e for e in listed if e["source"] == "config"]
    job_id = _job(hooks, configured["id"])
    got = [g for g in receiver.wait_for("/config", 1) if job_id in g.body]
    assert len(got) == 1 and len(got[0].headers["webhook-signature"].split()) == 2
    for secret in CONFIG_SECRETS:
        assert verify(got[0], secret).data.id == job_id
    gone = hooks.session().delete(f"{hooks.url}/v1/webhooks/{configured['id']}", timeout=10)
    assert gone.status_code == 409 and gone.json()["error"]["code"] == "webhook_from_config"


def test_a_rotated_secret_signs_beside_the_old_one_only_when_asked(
    hooks: Stack, receiver: Receiver
) -> None:
    endpoint = _create(hooks, receiver.url("/rotate"))
    base = f"{hooks.url}/v1/webhooks/{endpoint['id']}/rotate_secret"
    kept = (
        hooks.session()
        .post(base, json={"keep_old_secret_active_for_24_hours": True}, timeout=10)
        .json()
    )
    _job(hooks, endpoint["id"])
    [got] = receiver.wait_for("/rotate", 1)
    verify(got, kept["signing_secret"])
    verify(got, endpoint["signing_secret"])
    replaced = hooks.session().post(base, timeout=10).json()
    _job(hooks, endpoint["id"])
    got = receiver.wait_for("/rotate", 2)[1]
    verify(got, replaced["signing_secret"])
    refuse(got, kept["signing_secret"], "signature")
    secrets = {endpoint["signing_secret"], kept["signing_secret"], replaced["signing_secret"]}
    for proc in hooks.procs:
        assert not any(secret in proc.log_text() for secret in secrets)
    shown = hooks.session().get(f"{hooks.url}/v1/webhooks/{endpoint['id']}", timeout=10).text
    assert not any(secret in shown for secret in secrets)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "url"),
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "https://user:pw@example.com/x"}, "url"),
        ({"url": "https://example.com/x", "event_types": ["job.exploded"]}, "event_types"),
        ({"url": "https://example.com/x", "event_types": []}, "event_types"),
        ({"url": "https://example.com/x", "name": 7}, "name"),
    ],
)
def test_a_bad_endpoint_is_a_400_naming_the_field(
    hooks: Stack, body: dict[str, Any], param: str
) -> None:
    answer = hooks.session().post(f"{hooks.url}/v1/webhooks", json=body, timeout=10)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param


def test_another_key_s_endpoint_is_a_404_and_a_deleted_one_is_gone(hooks: Stack) -> None:
    endpoint = _create(hooks, "https://example.com/hook")
    url = f"{hooks.url}/v1/webhooks/{endpoint['id']}"
    for method in ("get", "delete"):
        answer = hooks.session(BOB_KEY).request(method, url, timeout=10)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "webhook_not_found"
    deleted = hooks.session().delete(url, timeout=10).json()
    assert deleted == {"id": endpoint["id"], "object": "webhook_endpoint.deleted", "deleted": True}
    assert hooks.session().get(url, timeout=10).status_code == 404
    assert hooks.session().get(url + "/deliveries", timeout=10).status_code == 404
