"""CompletionBuilder and the chunk checks, without processes: what the worker makes of a
stream of `chat.completion.chunk`s, validated against OpenAI's published schema."""

from __future__ import annotations

from typing import Any

import pytest

from tests.openai_schemas import check
from worker.upstream.sse import CompletionBuilder, InvalidChunk, parse_event, sse_data

HEADER = {
    "id": "chatcmpl-b1",
    "object": "chat.completion.chunk",
    "created": 1764480000,
    "model": "gpt-4o-mini",
    "system_fingerprint": "fp_1",
    "service_tier": "default",
}


def _chunk(*choices: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**HEADER, "choices": list(choices), **extra}


def _choice(
    index: int = 0, finish: str | None = None, logprobs: Any = None, **delta: Any
) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}


def _build(*chunks: dict[str, Any]) -> tuple[CompletionBuilder, list[str]]:
    builder = CompletionBuilder()
    texts = [builder.add(chunk) for chunk in chunks]
    return builder, texts


def _call(index: int, **fields: Any) -> dict[str, Any]:
    return {"index": index, **fields}


def test_tool_calls_split_across_chunks_are_reassembled() -> None:
    builder, texts = _build(
        _chunk(_choice(role="assistant", content=None)),
        _chunk(
            _choice(
                tool_calls=[
                    _call(
                        0,
                        id="call_a",
                        type="function",
                        function={"name": "get_weather", "arguments": ""},
                    )
                ]
            )
        ),
        _chunk(_choice(tool_calls=[_call(0, function={"arguments": '{"city":'})])),
        _chunk(
            _choice(
                tool_calls=[
                    _call(
                        1,
                        id="call_b",
                        type="function",
                        function={"name": "get_time", "arguments": ""},
                    )
                ]
            )
        ),
        _chunk(
            _choice(
                tool_calls=[
                    _call(0, function={"arguments": '"Paris"}'}),
                    _call(1, function={"arguments": "{}"}),
                ]
            )
        ),
        _chunk(_choice(finish="tool_calls")),
    )
    completion = builder.completion()
    check("CreateChatCompletionResponse", completion)
    assert texts == [""] * 6 and builder.finish_reason == "tool_calls"
    assert completion["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_time", "arguments": "{}"},
            },
        ],
    }


def test_a_refusal_is_kept_and_content_is_null() -> None:
    builder, texts = _build(
        _chunk(_choice(role="assistant", content="", refusal=None)),
        _chunk(_choice(refusal="I can't ")),
        _chunk(_choice(refusal="help with that.")),
        _chunk(_choice(finish="stop")),
    )
    completion = builder.completion()
    check("CreateChatCompletionResponse", completion)
    assert texts == ["", "", "", ""]
    assert completion["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "refusal": "I can't help with that.",
    }


def _token(text: str, logprob: float) -> dict[str, Any]:
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode()),
        "top_logprobs": [{"token": text, "logprob": logprob, "bytes": None}],
    }


def test_logprobs_of_every_chunk_are_concatenated_in_order() -> None:
    builder, texts = _build(
        _chunk(_choice(role="assistant", content="")),
        _chunk(
            _choice(content="Hel", logprobs={"content": [_token("Hel", -0.1)], "refusal": None})
        ),
        _chunk(_choice(content="lo", logprobs={"content": [_token("lo", -0.2)], "refusal": None})),
        _chunk(_choice(finish="stop")),
    )
    completion = builder.completion()
    check("CreateChatCompletionResponse", completion)
    assert texts == ["", "Hel", "lo", ""]
    choice = completion["choices"][0]
    assert choice["message"]["content"] == "Hello"
    assert choice["logprobs"] == {
        "content": [_token("Hel", -0.1), _token("lo", -0.2)],
        "refusal": None,
    }


def test_several_choices_interleaved_are_kept_apart() -> None:
    builder, texts = _build(
        _chunk(_choice(0, role="assistant", content=""), _choice(1, role="assistant", content="")),
        _chunk(_choice(1, content="B1 ")),
        _chunk(_choice(0, content="A1 ")),
        _chunk(_choice(0, content="A2"), _choice(1, content="B2")),
        _chunk(_choice(0, finish="stop")),
    )
    assert not builder.finished  # choice 1 has no finish_reason yet
    builder.add(_chunk(_choice(1, finish="length")))
    assert builder.finished
    completion = builder.completion()
    check("CreateChatCompletionResponse", completion)
    # Only the first choice's text is streamed into the job's output.
    assert texts == ["", "", "A1 ", "A2", ""]
    assert [
        (c["index"], c["message"]["content"], c["finish_reason"]) for c in completion["choices"]
    ] == [(0, "A1 A2", "stop"), (1, "B1 B2", "length")]


def test_the_usage_chunk_and_the_header_fields_are_carried() -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    builder, _ = _build(
        _chunk(_choice(role="assistant", content="")),
        _chunk(_choice(content="Hi there")),
        _chunk(_choice(finish="stop")),
        _chunk(usage=usage),
    )
    completion = builder.completion()
    check("CreateChatCompletionResponse", completion)
    assert completion == {
        "id": "chatcmpl-b1",
        "object": "chat.completion",
        "created": 1764480000,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_1",
        "service_tier": "default",
        "usage": usage,
        "choices": [
            {
                "index": 0,
                "logprobs": None,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Hi there", "refusal": None},
            }
        ],
    }


# What real upstreams send that OpenAI does not: accepted as it is.
LENIENT = {
    "no logprobs, no finish_reason": {"choices": [{"index": 0, "delta": {"content": "x"}}]},
    "no index": {"choices": [{"delta": {"content": "x"}}]},
    "null delta": {"choices": [{"index": 0, "delta": None, "finish_reason": "stop"}]},
    "unknown fields": {
        "choices": [
            {"index": 0, "delta": {"content": "x", "reasoning_content": "hm"}, "stop_reason": None}
        ],
        "obfuscation": "abc",
    },
    "usage without choices": {
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    },
    "null usage": {"choices": [], "usage": None},
    "tool call without function": {
        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1"}]}}]
    },
}


@pytest.mark.parametrize("chunk", LENIENT.values(), ids=LENIENT.keys())
def test_harmless_differences_are_accepted(chunk: dict[str, Any]) -> None:
    CompletionBuilder().add({**HEADER, **chunk})


def _delta(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta}]}


# Wrong shapes, and the field the error names.
MISSHAPEN = {
    "index null": ({"choices": [{"index": None, "delta": {}}]}, r"choices\[0\]\.index"),
    "index string": ({"choices": [{"index": "0", "delta": {}}]}, r"choices\[0\]\.index"),
    "index true": ({"choices": [{"index": True, "delta": {}}]}, r"choices\[0\]\.index"),
    "index negative": ({"choices": [{"index": -1, "delta": {}}]}, r"choices\[0\]\.index"),
    "choices an object": ({"choices": {"index": 0, "delta": {}}}, r"^choices is"),
    "choices of strings": ({"choices": ["x"]}, r"^choices is"),
    "delta a string": ({"choices": [{"index": 0, "delta": "x"}]}, r"choices\[0\]\.delta is"),
    "content a list": (_delta(content=["x"]), r"delta\.content"),
    "role a number": (_delta(role=1), r"delta\.role"),
    "refusal an object": (_delta(refusal={}), r"delta\.refusal"),
    "tool_calls of strings": (_delta(tool_calls=["x"]), r"delta\.tool_calls is"),
    "tool_calls an object": (_delta(tool_calls={"index": 0}), r"delta\.tool_calls is"),
    "tool call index null": (_delta(tool_calls=[{"index": None}]), r"tool_calls\[0\]\.index"),
    "tool call id a number": (_delta(tool_calls=[{"index": 0, "id": 7}]), r"tool_calls\[0\]\.id"),
    "tool call function a string": (
        _delta(tool_calls=[{"index": 0, "function": "f"}]),
        r"tool_calls\[0\]\.function is",
    ),
    "tool call arguments an object": (
        _delta(tool_calls=[{"index": 0, "function": {"arguments": {"a": 1}}}]),
        r"function\.arguments",
    ),
    "logprobs a string": (
        {"choices": [{"index": 0, "delta": {}, "logprobs": "x"}]},
        r"choices\[0\]\.logprobs is",
    ),
    "logprobs content an object": (
        {"choices": [{"index": 0, "delta": {}, "logprobs": {"content": {}, "refusal": None}}]},
        r"logprobs\.content",
    ),
    "finish_reason a number": (
        {"choices": [{"index": 0, "delta": {}, "finish_reason": 1}]},
        r"finish_reason",
    ),
    "usage a list": ({"choices": [], "usage": [1]}, r"^usage is"),
    "usage tokens a string": (
        {"choices": [], "usage": {"prompt_tokens": "5"}},
        r"usage\.prompt_tokens",
    ),
}


@pytest.mark.parametrize("chunk,where", MISSHAPEN.values(), ids=MISSHAPEN.keys())
def test_a_wrong_shape_is_an_invalid_chunk_naming_the_field(
    chunk: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidChunk, match=where):
        CompletionBuilder().add({**HEADER, **chunk})


@pytest.mark.parametrize(
    "data",
    [
        '{"choices": [',
        "[1, 2]",
        '"text"',
        "NaN",
        '{"choices": [], "usage": {"total_tokens": Infinity}}',
    ],
)
def test_an_event_that_is_not_a_json_object_is_an_invalid_chunk(data: str) -> None:
    with pytest.raises(InvalidChunk):
        parse_event(data)


def test_a_stream_that_is_not_utf8_is_an_invalid_chunk() -> None:
    with pytest.raises(InvalidChunk, match="UTF-8"):
        list(sse_data([b'data: {"x": "\xff"}\n\n']))


def test_a_character_split_between_network_reads_is_decoded_whole() -> None:
    encoded = 'data: {"content": "é"}\n\n'.encode()
    cut = encoded.index(b"\xa9")  # between the two bytes of "é"
    assert list(sse_data([encoded[:cut], encoded[cut:]])) == ['{"content": "é"}']
