"""The Responses stream derived from a job's events (chatq/responses/events.py), in-process:
the events of each way a job can go, numbered the same on every replay, each valid by
OpenAI's published schema."""

from __future__ import annotations

import json
from typing import Any

from chatq.config.settings import Settings
from chatq.jobs import record as jobs
from chatq.jobs.events import Event
from chatq.responses.events import EventMaker
from chatq.responses.inputs import checked_request
from chatq.responses.translation import translate
from tests import openai_schemas

JOB_ID = "job_" + "T" * 32


def _record(**fields: str) -> dict[str, str]:
    req = checked_request({"model": "fake", "input": "hi", "background": True})
    asked = translate(req, Settings())
    record = jobs.new_record(JOB_ID, "alice", "fake", "interactive", asked.request, 1.0)
    return {**record, **asked.fields, "output_text": "", **fields}


def _run(
    record: dict[str, str], final: dict[str, str], *events: tuple[str, str, str]
) -> list[dict[str, Any]]:
    maker, out = EventMaker(record), []
    for n, (kind, value, extra) in enumerate(events):
        out += maker.feed(Event(f"{n}-0", kind, value, extra))
        if kind == "end":
            out += maker.end(final)
    for event in out:
        openai_schemas.check(openai_schemas.RESPONSE_EVENT_SCHEMAS[event["type"]], event)
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    return out


def _kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"].removeprefix("response.") for e in events]


def test_cancelled_while_queued_ends_incomplete_with_no_message() -> None:
    final = _record(status=jobs.CANCELLED, completed_at="2.0")
    events = _run(
        _record(),
        final,
        ("status", "queued", ""),
        ("status", "cancelled", ""),
        ("end", "cancelled", "cancelled"),
    )
    assert _kinds(events) == ["created", "queued", "incomplete"]
    assert events[-1]["response"]["status"] == "cancelled"
    assert events[-1]["response"]["output"] == []


def test_a_cache_hit_is_born_ended_and_still_streams_its_message() -> None:
    result = {"choices": [{"message": {"content": "cached text"}}]}
    final = _record(
        status=jobs.COMPLETED,
        cached="1",
        finish_reason="stop",
        output_text="cached text",
        result=json.dumps(result),
        completed_at="1.0",
    )
    events = _run(
        _record(),
        final,
        ("status", "completed", ""),
        ("delta", "cached text", ""),
        ("end", "completed", "stop"),
    )
    assert _kinds(events) == [
        "created",
        "in_progress",
        "output_item.added",
        "content_part.added",
        "output_text.delta",
        "output_text.done",
        "content_part.done",
        "output_item.done",
        "completed",
    ]
    assert events[0]["response"]["status"] == "in_progress"
    assert events[-1]["response"]["output_text"] == "cached text"


def test_a_failure_after_some_text_closes_the_message_incomplete() -> None:
    error = {"type": "upstream_error", "code": "upstream_timeout", "message": "too slow"}
    final = _record(
        status=jobs.FAILED,
        output_text="par",
        error=json.dumps(error),
        error_status="504",
        completed_at="3.0",
    )
    events = _run(
        _record(),
        final,
        ("status", "queued", ""),
        ("status", "in_progress", ""),
        ("delta", "par", ""),
        ("status", "failed", ""),
        ("end", "failed", "error"),
    )
    assert _kinds(events)[-2:] == ["output_item.done", "failed"]
    assert events[-2]["item"]["status"] == "incomplete"
    assert events[-1]["response"]["error"] == {
        "code": "server_error",
        "message": "upstream_timeout: too slow",
    }


def test_requeued_after_a_lost_worker_says_queued_again_once() -> None:
    final = _record(
        status=jobs.COMPLETED, finish_reason="stop", output_text="ok", completed_at="4.0"
    )
    events = _run(
        _record(),
        final,
        ("status", "queued", ""),
        ("status", "in_progress", ""),
        ("status", "queued", ""),
        ("status", "queued", ""),
        ("status", "in_progress", ""),
        ("delta", "ok", ""),
        ("status", "completed", ""),
        ("end", "completed", "stop"),
    )
    assert _kinds(events)[:5] == ["created", "queued", "in_progress", "queued", "in_progress"]
    assert _kinds(events)[-1] == "completed"


def test_the_same_job_events_always_give_the_same_stream() -> None:
    final = _record(
        status=jobs.COMPLETED, finish_reason="length", output_text="a b", completed_at="5.0"
    )
    job_events = (
        ("status", "queued", ""),
        ("status", "in_progress", ""),
        ("delta", "x", ""),
        ("reset", "", ""),
        ("delta", "a", ""),
        ("delta", " b", ""),
        ("end", "completed", "length"),
    )
    first = _run(_record(), final, *job_events)
    assert first == _run(_record(), final, *job_events)
    assert first[-1]["type"] == "response.incomplete"
    assert first[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert first[-1]["response"]["output"][0]["id"] == "msg_" + "T" * 32 + "_1"
