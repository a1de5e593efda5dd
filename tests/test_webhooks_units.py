"""Webhook rules that need no running process: CHATQ_WEBHOOKS, signatures, the schedule."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
import requests
import standardwebhooks
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chatq.config import settings as config
from chatq.config.settings import ConfigError
from chatq.config.webhook_settings import url_problem
from chatq.webhooks import events as webhooks
from chatq.webhooks.addresses import address_allowed, literal_refused

KEYS = "alice:sk-test-a1,bob:sk-test-b2"
# Where a webhook may connect: globally routable unicast addresses, and IPv6 forms that carry
# a globally routable IPv4 address through a translator or a tunnel.
ALLOWED = (
    "8.8.8.8",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "::ffff:8.8.8.8",  # IPv4 mapped: the connection goes to 8.8.8.8
    "64:ff9b::808:808",  # NAT64's well-known prefix: its translator connects to 8.8.8.8
    "2002:808:808::1",  # 6to4 of 8.8.8.8
)
# And where it may not: each row an address webhooks must not reach, or a form of one.
REFUSED = (
    "127.0.0.1",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",  # the cloud metadata address
    "100.64.0.1",  # shared (carrier-grade NAT)
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fec0::1",  # site-local (deprecated, still routed inside sites)
    "ff02::1",
    "100::1",  # discard-only
    "2001:db8::1",  # documentation
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b:1::808:808",  # the local-use NAT64 prefix, whatever it carries
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "::127.0.0.1",  # IPv4-compatible (deprecated)
    "::8.8.8.8",
    "::ffff:0:127.0.0.1",  # SIIT's IPv4-translated form
    "::ffff:0:8.8.8.8",
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo: server and client (8.8.8.8) global
    "2001:0:7f00:1::f5f7:fffe",  # Teredo with server 127.0.0.1, client 10.8.0.1
)


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
        f"alice=https://{'a' * 64}.example.com/a#SECRET",  # a label over 63 characters
        f"alice=https://{'.'.join(['a' * 63] * 4)}/a#SECRET",  # a name over 253
        "alice=https://hooks..example.com/a#SECRET",
        "alice=https://hooks_1.example.com/a#SECRET",
        "alice=http://1.2.3.999/a#SECRET",
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


@pytest.mark.parametrize("address", ALLOWED)
def test_a_globally_routable_address_is_allowed(address: str) -> None:
    assert address_allowed(ipaddress.ip_address(address))
    assert not literal_refused(address)


@pytest.mark.parametrize("address", REFUSED)
def test_an_address_not_globally_routable_is_refused_in_every_form(address: str) -> None:
    assert not address_allowed(ipaddress.ip_address(address))
    assert literal_refused(address)


@pytest.mark.parametrize("host", ["127.1", "0x7f.1", "2130706433", "017700000001", "10.1"])
def test_a_host_the_resolver_reads_as_an_ipv4_address_is_checked_as_one(host: str) -> None:
    assert literal_refused(host)


HOST_CHARS = st.sampled_from("aZ09.-_:[]%\u00b5\u00fc\u00df\u0661\u3002\u200d\ud800 ")


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(HOST_CHARS, min_size=1, max_size=70).map("".join), st.booleans())
@example(host="][::", long_label=False)  # urlsplit reads `::` in it; urllib3 reads nothing
def test_every_url_accepted_is_one_a_delivery_can_send_to(host: str, long_label: bool) -> None:
    url = f"https://{'a' * 60 if long_label else ''}{host}/hook"
    if url_problem(url) is not None:
        return
    prepared = requests.Request("POST", url).prepare()  # raises what a delivery would raise
    name = urlsplit(prepared.url or "").hostname or ""
    name.encode("idna")  # as socket.getaddrinfo encodes it: labels of 1 to 63 characters
