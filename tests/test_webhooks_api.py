"""The webhook API's own rules, in process (create_app(...).test_client(), no server) on a
Redis of its own, no worker: which URLs an endpoint may have, the cap of endpoints per key
under concurrent creates, what replays cost and leave, and what deleting an endpoint leaves.
Each test has key names of its own, so that tests pass alone and in any order."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis
from flask import Flask
from werkzeug.test import TestResponse

from chatq import keys
from chatq.config import settings as config
from chatq.webhooks.deliveries import DELIVERED, Attempt, Deliveries
from chatq.webhooks.events import Event
from chatq.webhooks.store import API, MAX_ENDPOINTS_PER_KEY, Endpoint
from scripts.localredis import LocalRedis
from tests.inproc import in_process
from tests.test_webhooks_units import REFUSED

NAMES = ("urls", "literals", "crowd", "replayer", "bounded", "deleter")
KEYS = {name: f"sk-inprocess-hooks-{name}-9d2e" for name in NAMES}
REPLAY_RPM = 3
LOG_CAP = 1000


@pytest.fixture(scope="module")
def server() -> Iterator[LocalRedis]:
    s = LocalRedis().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def app(server: LocalRedis) -> Iterator[Flask]:
    env = {
        "CHATQ_REDIS_URL": server.url,
        "CHATQ_API_KEYS": ",".join(f"{name}:{key}" for name, key in KEYS.items()),
        "CHATQ_KEY_LIMITS": f"replayer=rpm:{REPLAY_RPM}",
    }
    with in_process(config.load(env)) as flask_app:
        yield flask_app


@pytest.fixture(scope="module")
def store(server: LocalRedis) -> redis.Redis:
    return redis.Redis.from_url(server.url, decode_responses=True)


def _auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def _create(app: Flask, name: str, url: str) -> TestResponse:
    return app.test_client().post("/v1/webhooks", json={"url": url}, headers=_auth(name))


def _error(r: TestResponse, status: int, code: str, param: str | None) -> None:
    assert r.status_code == status, r.get_data(as_text=True)
    error = r.get_json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["code"], error["param"]) == (code, param), error


LABEL_63 = "a" * 63
NAME_253 = ".".join([LABEL_63] * 3 + ["b" * 61])


@pytest.mark.parametrize(
    "url",
    [
        f"https://{'a' * 64}.example.com/hook",  # a label over 63 characters
        f"https://{NAME_253}x/hook",  # a name over 253 characters
        "https://hooks..example.com/hook",  # an empty label
        "https://-hooks.example.com/hook",  # a label starting with a hyphen
        "https://hooks_1.example.com/hook",  # not a letter, digit or hyphen
        "https://\N{SNOWMAN}.example/hook",  # not allowed by IDNA 2008
        "https://\N{MICRO SIGN}.example/hook",  # mapped by UTS #46, refused by urllib3
        "https://hooks.example.com/a b",  # whitespace
        "http://hooks.example.123/hook",  # ends in a number, yet no IPv4 address
        "http://8.8.8.8./hook",  # the resolver reads no name ending in a dot as an address
    ],
)
def test_a_url_outside_the_rules_is_a_400_naming_url(app: Flask, url: str) -> None:
    _error(_create(app, "urls", url), 400, "invalid_request", "url")


@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("url", {"url": "https://hooks.example.com/\ud800"}),
        ("name", {"url": "https://hooks.example.com/named", "name": "\udc00"}),
    ],
)
def test_a_lone_surrogate_is_a_400_naming_its_field(
    app: Flask, field: str, body: dict[str, str]
) -> None:
    r = app.test_client().post("/v1/webhooks", json=body, headers=_auth("urls"))
    _error(r, 400, "invalid_unicode", field)


@pytest.mark.parametrize(
    "url",
    [
        f"https://{LABEL_63}.example.com/hook",
        f"https://{NAME_253}/hook",
        "https://b\N{LATIN SMALL LETTER U WITH DIAERESIS}cher.example/hook",
        "https://xn--bcher-kva.example/hook",
        "https://Hooks.Example.com./hook",
        "http://8.8.8.8:8080/hook",
        "http://[2606:4700:4700::1111]/hook",
    ],
)
def test_a_host_within_the_rules_is_accepted_as_written(app: Flask, url: str) -> None:
    r = _create(app, "urls", url)
    assert r.status_code == 200, r.get_data(as_text=True)
    assert r.get_json()["url"] == url
    gone = app.test_client().delete(f"/v1/webhooks/{r.get_json()['id']}", headers=_auth("urls"))
    assert gone.status_code == 200


@pytest.mark.parametrize("address", [*REFUSED, "127.1", "2130706433", "0x7f.1"])
def test_an_address_webhooks_may_not_reach_is_refused_at_creation(app: Flask, address: str) -> None:
    host = f"[{address}]" if ":" in address else address
    _error(_create(app, "literals", f"http://{host}/hook"), 400, "webhook_url_refused", "url")


def test_concurrent_creates_make_exactly_the_cap(app: Flask, store: redis.Redis) -> None:
    tries = 2 * MAX_ENDPOINTS_PER_KEY
    start = threading.Barrier(tries)
    statuses: list[int] = []

    def create(n: int) -> None:
        start.wait()
        statuses.append(_create(app, "crowd", f"https://hooks.example.com/{n}").status_code)

    _create(app, "crowd", "https://hooks.example.com/first")  # the web's services made
    threads = [threading.Thread(target=create, args=(n,)) for n in range(tries)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count(200) == MAX_ENDPOINTS_PER_KEY - 1
    assert statuses.count(409) == tries - MAX_ENDPOINTS_PER_KEY + 1
    assert store.scard(keys.webhooks_of("crowd")) == MAX_ENDPOINTS_PER_KEY
    listed = app.test_client().get("/v1/webhooks", headers=_auth("crowd")).get_json()
    assert len(listed["data"]) == MAX_ENDPOINTS_PER_KEY


def _endpoint_with_a_delivery(app: Flask, store: redis.Redis, name: str) -> tuple[str, str]:
    """(endpoint id, delivery id): an endpoint of `name` with one delivery in its log."""
    r = _create(app, name, "https://hooks.example.com/replayed")
    assert r.status_code == 200, r.get_data(as_text=True)
    endpoint_id: str = r.get_json()["id"]
    event = Event(f"evt_{name}", "job.completed", 1_700_000_000, f"job_{name}")
    assert Deliveries(store, 604800, 0.0).add(f"dlv_{name}", _made(endpoint_id, name), event)
    return endpoint_id, f"dlv_{name}"


def _made(endpoint_id: str, name: str) -> Endpoint:
    """The endpoint `endpoint_id` of `name`, made through the API (as deliveries see it)."""
    return Endpoint(endpoint_id, name, "https://hooks.example.com/replayed", API)


def _replay(app: Flask, name: str, endpoint_id: str, delivery_id: str) -> TestResponse:
    return app.test_client().post(
        f"/v1/webhooks/{endpoint_id}/deliveries/{delivery_id}/replay", headers=_auth(name)
    )


def test_replays_count_against_the_key_s_requests_per_minute(
    app: Flask, store: redis.Redis
) -> None:
    endpoint_id, delivery_id = _endpoint_with_a_delivery(app, store, "replayer")
    answers = [_replay(app, "replayer", endpoint_id, delivery_id) for _ in range(REPLAY_RPM + 1)]
    assert [a.status_code for a in answers] == [200] * REPLAY_RPM + [429]
    _error(answers[-1], 429, "rate_limit_exceeded", None)
    refused = answers[-1]
    assert refused.get_json()["error"]["type"] == "requests"
    assert refused.headers["x-ratelimit-limit-requests"] == str(REPLAY_RPM)
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert int(refused.headers["Retry-After"]) >= 1
    assert answers[0].headers["x-ratelimit-remaining-requests"] == str(REPLAY_RPM - 1)
    log = app.test_client().get(f"/v1/webhooks/{endpoint_id}/deliveries", headers=_auth("replayer"))
    assert len(log.get_json()["data"]) == 1 + REPLAY_RPM  # the refused replay made none


def _delivery_keys(store: redis.Redis, endpoint_id: str) -> set[str]:
    pattern = keys.webhook_delivery("*")
    return {
        k for k in store.scan_iter(pattern, count=1000) if store.hget(k, "endpoint") == endpoint_id
    }


def test_the_log_s_cap_bounds_what_replays_leave(app: Flask, store: redis.Redis) -> None:
    endpoint_id, retried = _endpoint_with_a_delivery(app, store, "bounded")
    deliveries = Deliveries(store, 604800, 0.0)
    event = Event("evt_bounded_2", "job.completed", 1_700_000_001, "job_bounded_2")
    endpoint = _made(endpoint_id, "bounded")
    assert deliveries.add("dlv_bounded_ended", endpoint, event)
    token = dict(deliveries.take(limit=10, endpoint_cap=10, key_cap=10))["dlv_bounded_ended"]
    assert deliveries.begin("dlv_bounded_ended", token)
    assert deliveries.finish("dlv_bounded_ended", token, Attempt(DELIVERED, "delivered", 200, 0, 0))
    for n in range(LOG_CAP - 1):
        deliveries.add(f"dlv_bounded_r{n}", endpoint, event, replay_of="dlv_bounded_ended")
    # Two more through the API: they push the ended delivery and the oldest replay out.
    for _ in range(2):
        answer = _replay(app, "bounded", endpoint_id, f"dlv_bounded_r{LOG_CAP - 2}")
        assert answer.status_code == 200, answer.get_data(as_text=True)
    log = {str(d) for d in store.zrange(keys.webhook_deliveries(endpoint_id), 0, -1)}
    assert len(log) == LOG_CAP
    assert not {retried, "dlv_bounded_ended", "dlv_bounded_r0"} & log
    # What is left: the log, and the event's first delivery still being retried (it ends on
    # its schedule); the ended one and the replay pushed out are gone, from the schedule too.
    kept = {keys.webhook_delivery(d) for d in log | {retried}}
    assert _delivery_keys(store, endpoint_id) == kept
    assert store.zscore(keys.webhooks_due(), retried) is not None
    assert store.zscore(keys.webhooks_due(), "dlv_bounded_r0") is None


def _keys_of(store: redis.Redis, delivery_ids: list[str]) -> list[str]:
    """Every Redis key that names one of the deliveries, or holds one (a sorted set)."""
    found = []
    for key in store.scan_iter(count=1000):
        named = any(d in key for d in delivery_ids)
        held = store.type(key) == "zset" and any(store.zmscore(key, delivery_ids))
        if named or held:
            found.append(key)
    return found


def _new(app: Flask, name: str, url: str) -> Endpoint:
    answer = _create(app, name, url)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return _made(answer.get_json()["id"], name)


def test_deleting_an_endpoint_deletes_all_its_deliveries(app: Flask, store: redis.Redis) -> None:
    gone = _new(app, "deleter", "https://hooks.example.com/gone")
    kept = _new(app, "deleter", "https://hooks.example.com/kept")
    store.delete(keys.webhooks_due())  # other tests' deliveries: none is taken here
    deliveries = Deliveries(store, 604800, 20.0)
    event = Event("evt_deleter", "job.completed", 1_700_000_000, "job_deleter")
    for name, endpoint in (("running", gone), ("at_its_endpoint", gone), ("at_its_key", kept)):
        assert deliveries.add(f"dlv_deleter_{name}", endpoint, event)
    taken = dict(deliveries.take(10, endpoint_cap=1, key_cap=1))
    assert list(taken) == ["dlv_deleter_running"]  # the other two wait, one at each cap
    running = ("dlv_deleter_running", taken["dlv_deleter_running"])
    assert deliveries.begin(*running) is not None
    assert deliveries.add("dlv_deleter_due", gone, event)
    # Replays push the three first deliveries out of the log (pending, they are kept), and make
    # the endpoint's deliveries more than one step deletes.
    replays = [f"dlv_deleter_r{n}" for n in range(LOG_CAP)]
    for replay in replays:
        assert deliveries.add(replay, gone, event, replay_of="dlv_deleter_due")
    ids = ["dlv_deleter_running", "dlv_deleter_at_its_endpoint", "dlv_deleter_due", *replays]
    assert not {"dlv_deleter_running", "dlv_deleter_due"} & set(
        store.zrange(keys.webhook_deliveries(gone.id), 0, -1)
    )
    answer = app.test_client().delete(f"/v1/webhooks/{gone.id}", headers=_auth("deleter"))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert _keys_of(store, ids) == []
    assert [k for k in store.scan_iter(count=1000) if gone.id in k] == []
    # The attempt still running ends unrecorded; the key's slot it held went to the delivery
    # waiting for it, at the endpoint that is left.
    assert deliveries.renew([running]) == set()
    assert not deliveries.finish(*running, Attempt(DELIVERED, "delivered", 200, 0, 0))
    assert [d for d, _ in deliveries.take(10, 1, 1)] == ["dlv_deleter_at_its_key"]
    assert deliveries.add("dlv_deleter_late", gone, event) is False  # the relay came late
