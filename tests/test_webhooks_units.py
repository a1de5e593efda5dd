"""Webhook rules that need no running process: CHATQ_WEBHOOKS, signatures, the schedule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import standardwebhooks

from chatq import config, webhooks
from chatq.config import ConfigError

KEYS = "alice:sk-test-a1,bob:sk-test-b2"


def test_configured_endpoints_are_parsed_and_never_shown_with_their_secrets() -> None:
    new, old = webhooks.new_secret(), webhooks.new_secret()
    raw = f"alice=https://hooks.example.com/a#{new}#{old}  bob=http://10.0.0.1:8080/b#{new}"
    settings = config.load({"CHATQ_API_KEYS": KEYS, "CHATQ_WEBHOOKS": raw})
    alice, bob = settings.webhooks
    assert (alice.owner, alice.url, alice.secrets) == (
        "alice",
        "https://hooks.example.com/a",
        (new, old),
    )
    assert bob.url == "http://10.0.0.1:8080/b" and alice.endpoint_id != bob.endpoint_id
    assert (
        alice.endpoint_id
        == config.load({"CHATQ_API_KEYS": KEYS, "CHATQ_WEBHOOKS": raw}).webhooks[0].endpoint_id
    )
    assert new not in repr(settings) and old not in repr(settings)


@pytest.mark.parametrize(
    "entry",
    [
        "alice=https://example.com/a",  # no secret
        "https://example.com/a#SECRET",  # no key name
        "carol=https://example.com/a#SECRET",  # not a key name
        "alice=ftp://example.com/a#SECRET",
        "alice=https://u:p@example.com/a#SECRET",
        "alice=https://example.com/a#whsec_tooshort",
        "alice=https://example.com/a#SECRET alice=https://example.com/a#SECRET",
    ],
)
def test_a_bad_configured_endpoint_stops_the_start_without_quoting_its_secret(entry: str) -> None:
    secret = webhooks.new_secret()
    with pytest.raises(ConfigError) as caught:
        config.load({"CHATQ_API_KEYS": KEYS, "CHATQ_WEBHOOKS": entry.replace("SECRET", secret)})
    assert "CHATQ_WEBHOOKS" in str(caught.value) and secret not in str(caught.value)


def test_signatures_are_those_the_standard_webhooks_library_makes() -> None:
    secret = webhooks.new_secret()
    body = webhooks.Event("evt_1", "job.completed", 1_700_000_000, "job_x").body()
    mine = webhooks.signature(secret, "evt_1", 1_700_000_000, body)
    theirs = standardwebhooks.Webhook(secret).sign(
        "evt_1", datetime.fromtimestamp(1_700_000_000, tz=UTC), body
    )
    assert mine == theirs
    both = webhooks.headers([secret, webhooks.new_secret()], "evt_1", 1, body)
    assert len(both["webhook-signature"].split(" ")) == 2


def test_the_schedule_is_the_spec_s_ten_attempts_scaled_and_jittered() -> None:
    delays = [webhooks.retry_delay_s(done, 1.0, None) for done in range(1, 11)]
    assert delays[-1] is None and all(d is not None for d in delays[:-1])
    for delay, nominal in zip(delays[:-1], webhooks.RETRY_DELAYS_S, strict=True):
        assert delay is not None and nominal * 0.9 <= delay <= nominal * 1.1
    compressed = webhooks.retry_delay_s(3, 0.001, None)
    assert compressed is not None and compressed <= 1800 * 0.0011
    assert webhooks.retry_delay_s(1, 0.001, 30.0) == 30.0


def test_a_response_s_event_names_the_response() -> None:
    record = {
        "id": "job_abc",
        "api": "responses",
        "finish_reason": "length",
        "completed_at": "1700000000.5",
    }
    event = webhooks.event_for(record, "completed")
    assert (event.type, event.subject_id, event.created_at) == (
        "response.incomplete",
        "resp_abc",
        1_700_000_000,
    )
    assert webhooks.event_for({"id": "job_abc"}, "cancelled").type == "job.cancelled"
    assert event.id == webhooks.event_for(record, "completed").id
