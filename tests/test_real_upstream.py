"""chatq in front of an OpenAI-compatible server that is neither fakellm nor written here:
LiteLLM's proxy, installed from PyPI into a venv of its own (as `make bench` installs it), set
up with the README's gateway recipe: its `export` lines, read from the README and used as they
are but for the gateway's port and key, which are this test's. Its model answers with LiteLLM's
own mock response, so no fakellm is behind it: what chatq talks to is LiteLLM's server, end to
end (a chat, a stream and a Batch line)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from bench import litellm
from scripts.localredis import LocalRedis, free_port
from tests.batchkit import content, request_line, run_batch, wait_ended
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, LOG_DIR, Proc, wait_until
from tests.test_readme import recipes

pytestmark = pytest.mark.slow

RECIPE = recipes()["LiteLLM, or another gateway"]
MODEL = RECIPE["CHATQ_DEFAULT_MODEL"]  # the gateway config below names its model so
ANSWER = "Hello from a real OpenAI-compatible server."


def _config(master_key: str) -> str:
    """One model whose answer is LiteLLM's mock response (its api_base is never called)."""
    return (
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        "      api_base: http://127.0.0.1:9/v1\n"
        f"      mock_response: {json.dumps(ANSWER)}\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "general_settings:\n"
        f"  master_key: {master_key}\n"
    )


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[str, str]]:
    """LiteLLM's proxy: its `…/v1` URL and its key."""
    built = litellm.build()
    assert built.command is not None, built.note
    master_key = "sk-gateway-" + secrets.token_hex(12)
    config = Path(LOG_DIR) / "real-upstream-litellm.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(_config(master_key))
    port = free_port()
    proc: Proc = litellm.LiteLLMProc(built.command, config, port).start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(base + "/health/liveliness", timeout=2).ok, 120, "litellm")
        yield f"{base}/v1", master_key
    finally:
        proc.stop()


def as_run_here(recipe: dict[str, str], url: str, key: str) -> dict[str, str]:
    """The recipe's variables, with this test's gateway in place of the recipe's port and key."""
    recipe_url = urlsplit(recipe["CHATQ_UPSTREAM_URLS"])
    assert (recipe_url.hostname, recipe_url.path) == ("localhost", "/v1"), recipe
    env = {**recipe, "CHATQ_UPSTREAM_URLS": url, "CHATQ_UPSTREAM_API_KEY": key}
    assert set(env) == set(recipe), f"the recipe no longer sets the key: {recipe}"
    return env


@pytest.fixture(scope="module")
def chatq(gateway: tuple[str, str]) -> Iterator[Stack]:
    """chatq set up with the recipe's lines: the gateway's URL, its key, its model; on a Redis
    of its own (the session's may hold another file's stack, test_fuzz.py's, whose worker
    would take these jobs to its fakellm)."""
    env = as_run_here(RECIPE, *gateway)
    server = LocalRedis().start()
    stack = start_stack(server.url, env.pop("CHATQ_UPSTREAM_URLS"), **env)
    yield stack
    stack.stop()
    server.stop()


def test_a_chat_completion_through_the_gateway(chatq: Stack) -> None:
    body = {"messages": [{"role": "user", "content": "Hello"}]}
    r = chatq.session().post(f"{chatq.url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    completion = r.json()
    assert completion["object"] == "chat.completion"
    assert completion["choices"][0]["message"]["content"] == ANSWER
    job = chatq.submit("Hello", model=MODEL, wait=30).json()
    assert (job["status"], job["output_text"]) == ("completed", ANSWER), job


def test_a_stream_through_the_gateway(chatq: Stack) -> None:
    body = {"messages": [{"role": "user", "content": "Hello"}], "stream": True}
    with chatq.session().post(
        f"{chatq.url}/v1/chat/completions", json=body, stream=True, timeout=60
    ) as r:
        assert r.status_code == 200, r.text
        data = [line[6:] for line in r.iter_lines(decode_unicode=True) if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    # No count of pieces: the gateway's mock sends its pieces within one of the worker's
    # flush intervals (CHATQ_FLUSH_INTERVAL), which may carry them on as one.
    assert deltas and all(c["object"] == "chat.completion.chunk" for c in chunks), chunks
    assert "".join(d or "" for d in deltas) == ANSWER


def test_a_batch_line_through_the_gateway(chatq: Stack) -> None:
    batch = run_batch(chatq.url, [request_line("q1", "Hello", model=MODEL)], ALICE_KEY)
    ended = wait_ended(chatq.url, batch["id"], timeout_s=120)
    assert (ended["status"], ended["request_counts"]["completed"]) == ("completed", 1), ended
    (line,) = content(chatq.url, ended["output_file_id"])
    assert line.completion().choices[0].message.content == ANSWER
