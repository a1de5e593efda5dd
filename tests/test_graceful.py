"""A rolling restart of the web behind a load balancer: the official SDK never starts a second
job for a held /v1/chat/completions (it resends on 5xx, to whichever web the balancer picks)."""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Iterator

import httpx2 as httpx
import openai
import pytest

from chatq import keys
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, start_web, wait_until

pytestmark = pytest.mark.long

DB = 7
GRACE_S = 4


class RoundRobin(httpx.BaseTransport):
    """A load balancer in miniature: each request goes to the next web in turn."""

    def __init__(self, urls: list[str]) -> None:
        self.ports = itertools.cycle([int(u.rsplit(":", 1)[1]) for u in urls])
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(port=next(self.ports))
        return self.inner.handle_request(request)


@pytest.fixture(scope="module")
def survivors(redis_url: str, fakellm: str) -> Iterator[Stack]:
    """The module's worker and the web that stays up, on a database of their own."""
    s = start_stack(
        redis_url.rsplit("/", 1)[0] + f"/{DB}",
        fakellm,
        workers=1,
        CHATQ_GRACEFUL_TIMEOUT=str(GRACE_S),
    )
    yield s
    s.stop()
    s.redis.flushdb()


@pytest.fixture
def two_webs(survivors: Stack) -> Iterator[Stack]:
    """One worker and two web processes, the database emptied: the first web (the one a test
    stops) is the test's own; the worker and the second are the module's."""
    survivors.redis.flushdb()
    first, first_url = start_web(survivors.env)
    worker, second = survivors.procs
    env = {**survivors.env, "SECOND_URL": survivors.url}
    yield Stack(url=first_url, redis=survivors.redis, env=env, procs=[worker, first, second])
    first.stop()


def _sdk(s: Stack) -> openai.OpenAI:
    balancer = httpx.Client(transport=RoundRobin([s.url, s.env["SECOND_URL"]]), timeout=60)
    return openai.OpenAI(base_url=s.url + "/v1", api_key=ALICE_KEY, http_client=balancer)


def _jobs(s: Stack) -> list[str]:
    return sorted(s.redis.scan_iter(match=keys.jobs_pattern()))


def _call_then_sigterm_the_first_web(s: Stack, model: str) -> object:
    """Start a held completion on the first web, SIGTERM that web once the job runs."""
    outcome: dict[str, object] = {}

    def call() -> None:
        try:
            outcome["answer"] = _sdk(s).chat.completions.create(
                model=model, messages=[{"role": "user", "content": "held through a restart"}]
            )
        except openai.APIError as exc:
            outcome["answer"] = exc

    thread = threading.Thread(target=call)
    thread.start()
    wait_until(
        lambda: any(s.redis.hget(j, "status") == "in_progress" for j in _jobs(s)),
        20,
        "the held job running",
    )
    s.procs[1].signal(signal.SIGTERM)  # the first web: the SDK's request is held there
    thread.join(60)
    return outcome["answer"]


def test_a_held_completion_that_ends_within_the_grace_is_answered(two_webs: Stack) -> None:
    answer = _call_then_sigterm_the_first_web(two_webs, "fake:ttft=1.5")
    assert isinstance(answer, openai.types.chat.ChatCompletion), answer
    assert answer.choices[0].message.content == "held through a restart"
    assert len(_jobs(two_webs)) == 1


def test_a_held_completion_that_ends_in_the_last_second_of_the_grace_is_answered(
    two_webs: Stack,
) -> None:
    # The job cannot end before its first token, GRACE_S - 0.7 s after it started (the
    # SIGTERM comes a moment after the start): a web that held for less than the whole grace
    # (it held GRACE_S - 1 s) answers 503 instead.
    answer = _call_then_sigterm_the_first_web(two_webs, f"fake:ttft={GRACE_S - 0.7}")
    assert isinstance(answer, openai.types.chat.ChatCompletion), answer
    assert len(_jobs(two_webs)) == 1


def test_a_held_completion_past_the_grace_gets_an_answer_sdks_do_not_resend(
    two_webs: Stack,
) -> None:
    answer = _call_then_sigterm_the_first_web(two_webs, f"fake:ttft={GRACE_S + 4}")
    assert isinstance(answer, openai.APIStatusError), answer
    assert answer.status_code == 503
    assert answer.response.headers["x-should-retry"] == "false"
    assert answer.response.json()["error"]["code"] == "server_shutting_down"
    job_id = answer.response.headers["Chatq-Job-Id"]
    assert _jobs(two_webs) == [keys.job(job_id)]
    # The job goes on, and the other web answers for it.
    done = (
        two_webs.session()
        .get(f"{two_webs.env['SECOND_URL']}/v1/jobs/{job_id}", params={"wait": 30}, timeout=40)
        .json()
    )
    assert done["status"] == "completed", done
