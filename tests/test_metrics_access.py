"""The series that name a tenant (a key name: its use, budgets, refusals, tokens) are served
only to a scrape with `Authorization: Bearer <CHATQ_METRICS_TOKEN>`, by the web's /metrics
and by each worker's; a scrape without credentials gets every other series, one with wrong
credentials a 401."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from chatq.metrics.shared import Scrape, scrape_access
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, METRICS_AUTH, METRICS_TOKEN

SCRAPES = {
    "none": {},
    "token": METRICS_AUTH,
    "api key": {"Authorization": f"Bearer {ALICE_KEY}"},
    "basic": {"Authorization": f"Basic {METRICS_TOKEN}"},
}

# Series that name no key, which every scrape gets.
CORE = {
    "web": {"chatq_queue_depth", "chatq_http_requests_in_progress", "chatq_longpoll_waiters"},
    "worker": {"chatq_worker_slots", "chatq_jobs_finished_total", "chatq_tokens_total"},
}


@pytest.fixture(scope="module")
def limited(fakellm: str) -> Iterator[Stack]:
    """A web and a worker on a Redis of their own, alice with a daily budget (so that the web
    shows her use)."""
    server = LocalRedis().start()
    stack = start_stack(server.url, fakellm, workers=1, CHATQ_KEY_LIMITS="alice=day:1000000")
    done = stack.submit("count my tokens", wait=30)
    assert done.json()["status"] == "completed", done.text
    yield stack
    stack.stop()
    server.stop()


def _urls(s: Stack) -> dict[str, str]:
    worker = "http://" + s.procs[0].env["CHATQ_WORKER_METRICS_BIND"] + "/metrics"
    return {"web": f"{s.url}/metrics", "worker": worker}


@pytest.mark.parametrize("where", ["web", "worker"])
def test_a_scrape_without_credentials_gets_no_series_that_names_a_key(
    limited: Stack, where: str
) -> None:
    url = _urls(limited)[where]
    open_text = requests.get(url, timeout=10).text
    full = requests.get(url, headers=METRICS_AUTH, timeout=10).text
    named = 'key="alice"'
    assert named in full
    assert named not in open_text and "alice" not in open_text
    kept = {line.split("{")[0].split()[0] for line in open_text.splitlines() if line[:1] != "#"}
    assert not [name for name in kept if name.startswith("chatq_key_")]
    assert CORE[where] <= kept, kept


@pytest.mark.parametrize("where", ["web", "worker"])
@pytest.mark.parametrize("scrape", ["api key", "basic"])
def test_a_scrape_with_wrong_credentials_is_401(limited: Stack, where: str, scrape: str) -> None:
    answer = requests.get(_urls(limited)[where], headers=SCRAPES[scrape], timeout=10)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "invalid_metrics_token"
    assert "alice" not in answer.text


def test_without_a_token_set_no_scrape_reads_a_tenants_series() -> None:
    assert scrape_access("", "") is Scrape.UNTENANTED
    assert scrape_access(f"Bearer {METRICS_TOKEN}", "") is Scrape.REFUSED
    assert scrape_access("Bearer ", "") is Scrape.REFUSED


def test_only_the_token_as_a_bearer_reads_every_series() -> None:
    assert scrape_access(f"Bearer {METRICS_TOKEN}", METRICS_TOKEN) is Scrape.ALL
    assert scrape_access(f"bearer  {METRICS_TOKEN} ", METRICS_TOKEN) is Scrape.ALL
    assert scrape_access(f"Bearer {METRICS_TOKEN}x", METRICS_TOKEN) is Scrape.REFUSED
    assert scrape_access(f"Basic {METRICS_TOKEN}", METRICS_TOKEN) is Scrape.REFUSED
    assert scrape_access("", METRICS_TOKEN) is Scrape.UNTENANTED
