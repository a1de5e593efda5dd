"""Webhook deliveries outlive the worker that started them, and never reach loopback,
private or link-local addresses unless CHATQ_WEBHOOK_ALLOW_PRIVATE=1 says so."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from chatq.config.webhook_settings import config_endpoint_id
from chatq.webhooks.events import new_secret
from chatq.webhooks.net import guarded_session, refused
from tests.conftest import start_stack
from tests.procs import ALICE_KEY, start_worker, wait_until
from tests.webhook_receiver import Answer, Receiver, verify


@pytest.fixture
def redis_url(own_redis_url: str) -> str:
    """A Redis of this test's own: no other test's worker takes its deliveries."""
    return own_redis_url


def _submit(url: str, hook: str) -> str:
    """A job of alice's, to the endpoint `hook` (to all of hers when empty)."""
    answer = requests.post(
        f"{url}/v1/jobs?wait=30",
        headers={
            "Authorization": f"Bearer {ALICE_KEY}",
            **({"Chatq-Webhook": hook} if hook else {}),
        },
        json={"messages": [{"role": "user", "content": "hi"}]},
        timeout=40,
    )
    assert answer.status_code == 200, answer.text
    job_id: str = answer.json()["id"]
    return job_id


# A killed worker's delivery comes back after its lease: a chaos test, `make test-slow`.
@pytest.mark.slow
def test_a_worker_killed_mid_delivery_loses_none(
    fakellm: str, redis_url: str, receiver: Receiver
) -> None:
    secret = new_secret()
    receiver.plan("/held", Answer(503, hold=True))
    stack = start_stack(
        redis_url,
        fakellm,
        CHATQ_WEBHOOK_TIMEOUT="1",
        CHATQ_WEBHOOKS=f"alice={receiver.url('/held')}#{secret}",
    )
    try:
        job_id = _submit(stack.url, config_endpoint_id("alice", receiver.url("/held")))
        receiver.wait_for("/held", 1)  # the worker is in the middle of the delivery
        stack.procs[0].kill()
        stack.procs.append(start_worker(stack.env, redis_url))
        got = receiver.wait_for("/held", 2)
    finally:
        stack.stop()
    assert len(receiver.accepted("/held")) == 1
    assert got[0].headers["webhook-id"] == got[1].headers["webhook-id"]
    assert verify(receiver.accepted("/held")[0], secret).data.id == job_id


def test_private_destinations_are_refused_at_registration_and_at_connect_time(
    fakellm: str, redis_url: str, receiver: Receiver
) -> None:
    # A configured endpoint is never checked at registration: the connect-time check is what
    # stops it (as it stops a name whose DNS answer changed after registration). The second
    # reaches the receiver only through a NAT64 translator, which the check refuses as it
    # refuses the IPv4 address it carries.
    secret = new_secret()
    private = receiver.url("/private")
    nat64 = private.replace("127.0.0.1", "[64:ff9b::7f00:1]").replace("/private", "/nat64")
    stack = start_stack(
        redis_url,
        fakellm,
        CHATQ_WEBHOOK_ALLOW_PRIVATE="0",
        CHATQ_WEBHOOKS=f"alice={private}#{secret} alice={nat64}#{secret}",
    )
    try:
        s = stack.session()
        for url in (
            private,
            nat64,
            "http://localhost/x",
            "http://[::1]/x",
            "http://10.0.0.8/x",
            "http://169.254.169.254/latest/meta-data",
            "http://[::ffff:0:a9fe:a9fe]/latest/meta-data",
            "http://[2002:a9fe:a9fe::1]/latest/meta-data",
            "http://[fec0::1]/x",
            "http://127.1/x",
        ):
            answer = s.post(f"{stack.url}/v1/webhooks", json={"url": url}, timeout=10)
            assert answer.status_code == 400, url
            assert answer.json()["error"]["code"] == "webhook_url_refused", url
        _submit(stack.url, "")  # to both configured endpoints
        tried = {url: _first_attempt(s, stack.url, url) for url in (private, nat64)}
    finally:
        stack.stop()
    for url, first in tried.items():
        assert (first["outcome"], first["status_code"]) == ("refused", None), url
    assert receiver.at("/private") == [] and receiver.at("/nat64") == []


def _ended(attempt: dict[str, Any]) -> bool:
    return attempt["outcome"] != "in_progress"


def _first_attempt(s: requests.Session, base: str, url: str) -> dict[str, Any]:
    """The first attempt, once ended, of the first delivery to alice's configured endpoint at
    `url`."""
    log_url = f"{base}/v1/webhooks/{config_endpoint_id('alice', url)}/deliveries"

    def tried() -> list[dict[str, Any]]:
        deliveries = s.get(log_url, timeout=10).json()["data"]
        return [d for d in deliveries if d["attempts"][:1] and _ended(d["attempts"][0])]

    deliveries: list[dict[str, Any]] = wait_until(tried, 30, f"an attempt at {url}")
    first: dict[str, Any] = deliveries[0]["attempts"][0]
    return first


@pytest.mark.parametrize(
    "host", ["[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[::127.0.0.1]", "[::ffff:0:7f00:1]"]
)
def test_an_ipv6_form_of_a_refused_address_is_refused_when_connecting(
    receiver: Receiver, host: str
) -> None:
    url = receiver.url("/embedded").replace("127.0.0.1", host)
    with pytest.raises(requests.ConnectionError) as caught:
        guarded_session(allow_private=False).post(url, data="{}", timeout=5)
    assert refused(caught.value)


def test_a_name_is_checked_when_connecting(receiver: Receiver) -> None:
    url = receiver.url("/named").replace("127.0.0.1", "localhost")
    with pytest.raises(requests.ConnectionError) as caught:
        guarded_session(allow_private=False).post(url, data="{}", timeout=5)
    assert refused(caught.value) and receiver.at("/named") == []
    answer = guarded_session(allow_private=True).post(url, data="{}", timeout=5)
    assert answer.status_code == 200 and len(receiver.at("/named")) == 1
