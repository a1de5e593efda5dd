"""Per-key token limits and budgets, end to end: a web and a worker on a Redis of their own.

Each test uses key names of its own, so that tests pass alone and in any order. A job that
must keep its tokens held for a while is a slow one (`fake:ttft=30`), cancelled at the end."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import requests

from chatq.chat.tokens import count_prompt_tokens
from scripts.localredis import LocalRedis
from tests import chatq_schemas
from tests.batchkit import jsonl, request_line
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, METRICS_AUTH, wait_until
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.long

NAMES = (
    "tpm1",
    "tpm2",
    "other",
    "budget",
    "refund",
    "usage",
    "batchrate",
    "batchbudget",
    "hooks",
    "erase",
)
KEYS = {name: f"sk-lim-{name}-4c1f9e" for name in NAMES}
LIMITS = {
    "tpm1": "tpm:6000",
    "tpm2": "tpm:6000",
    "other": "tpm:6000",
    "budget": "day:3000",
    "refund": "tpm:6000,day:100000,month:1000000",
    "usage": "rpm:100,tpm:6000,day:100000,month:1000000",
    "batchrate": "tpm:6000",
    "batchbudget": "day:3000",
    "hooks": "tpm:100000",
    "erase": "tpm:100000",
}
SLOW = "fake:ttft=30"
JOBS_POST = 'endpoint="/v1/jobs"'


@pytest.fixture(scope="module")
def lim(fakellm: str) -> Iterator[Stack]:
    server = LocalRedis().start()
    keys = ",".join(f"{name}:{key}" for name, key in KEYS.items())
    stack = start_stack(
        server.url,
        fakellm,
        workers=1,
        CHATQ_API_KEYS=keys,
        CHATQ_KEY_LIMITS=" ".join(f"{n}={v}" for n, v in LIMITS.items()),
    )
    yield stack
    stack.stop()
    server.stop()


def _body(content: str, max_tokens: int, model: str = "fake") -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
    }


def _cost(body: dict[str, Any]) -> int:
    """What the web charges for `body`: its prompt (counted as it counts) and max_tokens."""
    return count_prompt_tokens(body) + int(body["max_tokens"])


def _post(
    stack: Stack, name: str, body: dict[str, Any], path: str = "/v1/jobs", **params: Any
) -> requests.Response:
    return stack.session(KEYS[name]).post(
        f"{stack.url}{path}", json=body, params=params, timeout=70
    )


def _cancel(stack: Stack, name: str, job_id: str) -> None:
    stack.session(KEYS[name]).post(f"{stack.url}/v1/jobs/{job_id}/cancel", timeout=10)


def _usage(stack: Stack, name: str) -> dict[str, Any]:
    r = stack.session(KEYS[name]).get(f"{stack.url}/v1/usage", timeout=10)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _settled(stack: Stack, name: str) -> dict[str, Any]:
    """The key's usage once none of its jobs holds tokens any more."""
    return dict(
        wait_until(
            lambda: (u := _usage(stack, name))["reserved_tokens"] == 0 and u,
            30,
            f"{name}'s jobs settled",
        )
    )


def _metrics(url: str) -> str:
    return requests.get(f"{url}/metrics", headers=METRICS_AUTH, timeout=10).text


def _sample(text: str, name: str, *labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(label in line for label in labels):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _worker_metrics(stack: Stack) -> str:
    return _metrics("http://" + stack.procs[0].env["CHATQ_WORKER_METRICS_BIND"])


def test_a_key_over_its_tpm_gets_429_with_openais_headers_while_others_pass(lim: Stack) -> None:
    fill = _body("fill", 5000, SLOW)
    held = _post(lim, "tpm1", fill)
    assert held.status_code == 202, held.text
    left = 6000 - _cost(fill)  # a fresh key's bucket is full
    assert held.headers["x-ratelimit-limit-tokens"] == "6000"
    assert held.headers["x-ratelimit-remaining-tokens"] == str(left)
    assert held.headers["x-ratelimit-reset-tokens"] == f"{_cost(fill) / 100:g}s"
    try:
        ask = _body("one more", 1600)
        over = _post(lim, "tpm1", ask)
        assert over.status_code == 429, over.text
        error = over.json()["error"]
        assert (error["code"], error["type"]) == ("rate_limit_exceeded", "tokens")
        remaining = int(over.headers["x-ratelimit-remaining-tokens"])
        wait_ms = int(over.headers["retry-after-ms"])
        # The bucket refills 100 tokens a second: the wait is what the request lacks.
        assert left <= remaining < _cost(ask)
        assert (_cost(ask) - remaining - 1) * 10 <= wait_ms <= (_cost(ask) - remaining) * 10
        assert over.headers["Retry-After"] == str(math.ceil(wait_ms / 1000))
        assert over.headers["x-ratelimit-limit-tokens"] == "6000"
        assert "x-should-retry" not in over.headers
        # The same key through the other front doors; another key is not affected at all.
        chat = _post(lim, "tpm1", ask, "/v1/chat/completions")
        assert chat.status_code == 429 and "retry-after-ms" in chat.headers
        other = _post(lim, "other", ask, wait=30)
        assert other.status_code == 200 and other.json()["status"] == "completed"
        assert other.headers["x-ratelimit-remaining-tokens"] == str(6000 - _cost(ask))
    finally:
        _cancel(lim, "tpm1", held.json()["id"])


def test_the_openai_sdk_backs_off_as_the_headers_say_and_then_succeeds(lim: Stack) -> None:
    held = _post(lim, "tpm2", _body("fill", 5000, SLOW))
    assert held.status_code == 202, held.text
    before = _metrics(lim.url)
    try:
        # One retry only: it succeeds only if the SDK waits as long as retry-after-ms says
        # (about 3 s here: 300 tokens over the 6,000 a minute); its own backoff would retry
        # after half a second, and be refused.
        client = openai.OpenAI(base_url=lim.url + "/v1", api_key=KEYS["tpm2"], max_retries=1)
        reply = client.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "worth the wait"}], max_tokens=1300
        )
        assert reply.choices[0].message.content == "worth the wait"
    finally:
        _cancel(lim, "tpm2", held.json()["id"])
    after = _metrics(lim.url)
    chat = 'endpoint="/v1/chat/completions"'
    name = "chatq_http_request_duration_seconds_count"
    assert [
        _sample(after, name, chat, f'status="{s}"') - _sample(before, name, chat, f'status="{s}"')
        for s in (429, 200)
    ] == [1, 1]
    refused = 'chatq_key_rejections_total{key="tpm2",reason="tokens_per_minute"}'
    assert refused in after and float(after.split(refused)[1].split()[0]) == 1


def test_a_key_over_its_budget_gets_insufficient_quota_and_the_sdk_does_not_retry(
    lim: Stack,
) -> None:
    spend = _post(lim, "budget", _body("spend", 2900, "fake:tokens=2900"), wait=30)
    assert spend.json()["status"] == "completed", spend.text
    spent = spend.json()["result"]["usage"]["total_tokens"]
    usage = _settled(lim, "budget")
    assert usage["day"]["tokens"] == spent and usage["day"]["limit_tokens"] == 3000
    over = _post(lim, "budget", _body("more", 200))
    assert over.status_code == 429, over.text
    assert over.json()["error"]["code"] == over.json()["error"]["type"] == "insufficient_quota"
    assert over.headers["x-should-retry"] == "false"
    assert "Retry-After" not in over.headers and "retry-after-ms" not in over.headers
    before = _metrics(lim.url)
    client = openai.OpenAI(base_url=lim.url + "/v1", api_key=KEYS["budget"], max_retries=2)
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(
            model="fake", max_tokens=200, messages=[{"role": "user", "content": "more"}]
        )
    assert caught.value.code == "insufficient_quota"
    after = _metrics(lim.url)
    reason = ('key="budget"', 'reason="daily_budget"')
    assert (
        _sample(after, "chatq_key_rejections_total", *reason)
        - _sample(before, "chatq_key_rejections_total", *reason)
        == 1
    )  # one attempt, no retry
    assert (
        _sample(after, "chatq_admission_rejections_total", 'reason="insufficient_quota"')
        - _sample(before, "chatq_admission_rejections_total", 'reason="insufficient_quota"')
        == 1
    )


def test_a_job_that_used_fewer_tokens_frees_the_difference(lim: Stack) -> None:
    body = _body("three little words", 5400)
    done = _post(lim, "refund", body, wait=30)
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    assert int(done.headers["x-ratelimit-remaining-tokens"]) == 6000 - _cost(body)
    used = done.json()["result"]["usage"]["total_tokens"]
    usage = _settled(lim, "refund")
    assert usage["day"]["tokens"] == usage["month"]["tokens"] == used
    assert usage["rate_limits"]["remaining_tokens"] >= 6000 - used
    # Without the refund this one would wait most of a minute for the bucket to refill.
    again = _post(lim, "refund", body)
    assert again.status_code == 202, again.text
    _cancel(lim, "refund", again.json()["id"])
    worker = _worker_metrics(lim)
    assert _sample(worker, "chatq_key_tokens_total", 'key="refund"') >= used


def test_usage_shows_the_keys_limits_and_use_and_metrics_show_every_key(lim: Stack) -> None:
    body = _body("count me", 50)
    done = _post(lim, "usage", body, wait=30)
    assert done.json()["status"] == "completed", done.text
    usage = _settled(lim, "usage")
    chatq_schemas.check("Usage", usage)
    assert usage["object"] == "usage" and usage["key"] == "usage"
    rate = usage["rate_limits"]
    assert (rate["limit_requests"], rate["limit_tokens"]) == (100, 6000)
    assert 0 < rate["remaining_requests"] <= 100 and 0 < rate["remaining_tokens"] <= 6000
    assert re.fullmatch(r"(\d+m)?\d+(\.\d+)?m?s", rate["reset_tokens"]), rate
    day, month = usage["day"], usage["month"]
    assert day["object"] == month["object"] == "bucket"
    assert day["end_time"] - day["start_time"] == 86400
    assert month["start_time"] <= day["start_time"] < day["end_time"] <= month["end_time"]
    assert day["num_model_requests"] >= 1 and day["tokens"] >= 1
    assert (day["limit_tokens"], month["limit_tokens"]) == (100000, 1000000)
    assert day["remaining_tokens"] == 100000 - day["tokens"]
    assert requests.get(f"{lim.url}/v1/usage", timeout=10).status_code == 401
    text = _metrics(lim.url)
    assert _sample(text, "chatq_key_tokens_used", 'key="usage"', 'period="day"') == day["tokens"]
    assert _sample(text, "chatq_key_token_budget", 'key="usage"', 'period="month"') == 1000000
    assert 'chatq_key_tokens_reserved{key="tpm1"}' in text
    assert not [k for k in KEYS.values() if k in text]
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: make test installs Debian's `prometheus` package"
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=text.encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def _run_batch(stack: Stack, name: str, lines: list[dict[str, Any]]) -> dict[str, Any]:
    client = openai.OpenAI(base_url=stack.url + "/v1", api_key=KEYS[name])
    uploaded = client.files.create(file=("in.jsonl", jsonl(list(lines))), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        batch = client.batches.retrieve(batch.id, extra_query={"wait": 20})
    files = [client.files.content(f).text for f in (batch.output_file_id, batch.error_file_id) if f]
    return {"batch": batch, "lines": [line for text in files for line in text.splitlines()]}


def _line(custom_id: str, max_tokens: int, model: str = "fake") -> dict[str, Any]:
    line = request_line(custom_id, custom_id, model)
    line["body"]["max_tokens"] = max_tokens
    return line


def test_a_batch_line_over_the_keys_rate_waits_in_its_file_until_tokens_are_free(
    lim: Stack,
) -> None:
    # The first two lines hold 2 x ~2,500 of 6,000 tokens while they run; the third waits
    # until one of them has ended and given back what it did not use.
    lines = [_line("q1", 2500, "fake:ttft=1"), _line("q2", 2500, "fake:ttft=1"), _line("q3", 2500)]
    ran = _run_batch(lim, "batchrate", lines)
    assert ran["batch"].status == "completed" and ran["batch"].request_counts.completed == 3
    jobs = {}
    for text in ran["lines"]:
        line = json.loads(text)
        job = (
            lim.session(KEYS["batchrate"])
            .get(f"{lim.url}/v1/jobs/{line['response']['request_id']}", timeout=10)
            .json()
        )
        jobs[line["custom_id"]] = job
    assert jobs["q3"]["created_at"] >= min(jobs["q1"]["completed_at"], jobs["q2"]["completed_at"])


def test_a_batch_line_over_the_keys_budget_is_an_error_line(lim: Stack) -> None:
    ran = _run_batch(lim, "batchbudget", [_line("small", 100), _line("huge", 4000)])
    counts = ran["batch"].request_counts
    assert ran["batch"].status == "completed" and (counts.completed, counts.failed) == (1, 1)
    errors = [line for line in ran["lines"] if '"custom_id":"huge"' in line]
    assert len(errors) == 1 and '"code":"insufficient_quota"' in errors[0]


def test_no_webhook_for_a_job_that_asked_for_none_when_limits_announce_every_job(
    lim: Stack,
) -> None:
    receiver = Receiver()
    hooks = lim.session(KEYS["hooks"])
    endpoint = hooks.post(
        f"{lim.url}/v1/webhooks", json={"url": receiver.url("/h")}, timeout=10
    ).json()
    quiet = hooks.post(
        f"{lim.url}/v1/jobs",
        params={"wait": 30},
        timeout=40,
        headers={"Chatq-Webhook": "none"},
        json=_body("quiet", 5),
    ).json()
    loud = _post(lim, "hooks", _body("loud", 5), wait=30).json()
    assert quiet["status"] == loud["status"] == "completed"

    def logged() -> list[str]:
        page = hooks.get(f"{lim.url}/v1/webhooks/{endpoint['id']}/deliveries", timeout=10).json()
        return [d["event"]["data"]["id"] for d in page["data"]]

    # One relay reads the outbox in order: once the second job's delivery is logged, the
    # first job's end has been handled too.
    assert wait_until(logged, 30, "the delivery of the second job") == [loud["id"]]
    hooks.delete(f"{lim.url}/v1/webhooks/{endpoint['id']}", timeout=10)


def test_an_answered_and_erased_response_holds_nothing_afterwards(lim: Stack) -> None:
    body = {"model": "fake", "input": "gone", "store": False, "max_output_tokens": 5000}
    r = _post(lim, "erase", body, "/v1/responses")
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    held = 100000 - int(r.headers["x-ratelimit-remaining-tokens"])
    assert held > 5000
    usage = _settled(lim, "erase")
    # Its end was read before it was erased (what it used), or after (what it held stands).
    assert usage["day"]["tokens"] in (r.json()["usage"]["total_tokens"], held)
    assert usage["day"]["num_model_requests"] == 1


def test_without_limits_usage_answers_nulls_and_no_header_is_sent(stack: Stack) -> None:
    r = stack.submit("no limits here")
    assert r.status_code == 202 and not [h for h in r.headers if h.startswith("x-ratelimit")]
    usage = stack.session(ALICE_KEY).get(f"{stack.url}/v1/usage", timeout=10).json()
    chatq_schemas.check("Usage", usage)
    assert set(usage["rate_limits"].values()) == {None}
    assert usage["day"]["limit_tokens"] is None and usage["key"] == "alice"
