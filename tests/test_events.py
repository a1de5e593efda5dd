"""Incremental output: the events long-poll with a cursor, and the same as Server-Sent Events."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import requests

from tests.conftest import BOB_KEY, Stack

pytestmark = pytest.mark.long

STREAMED = "fake:tps=100,tokens=500"


def _pages(stack: Stack, job_id: str, cursor: str | None = None) -> list[dict[str, Any]]:
    pages = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        params: dict[str, Any] = {"wait": 10}
        if cursor is not None:
            params["cursor"] = cursor
        page = stack.get(job_id, suffix="/events", **params).json()
        pages.append(page)
        cursor = page["cursor"]
        if page["done"]:
            return pages
    raise AssertionError("events never said done")


def _text_after_last_reset(events: list[dict[str, Any]]) -> str:
    text = ""
    for event in events:
        if event["type"] == "reset":
            text = ""
        elif event["type"] == "delta":
            text += event["delta"]
    return text


def test_a_streamed_answer_arrives_over_many_pages(stack: Stack) -> None:
    job_id = stack.submit("x", model=STREAMED).json()["id"]
    pages = _pages(stack, job_id)
    events = [e for p in pages for e in p["events"]]
    assert len([p for p in pages if any(e["type"] == "delta" for e in p["events"])]) >= 10
    # Deltas are batched: far fewer events than tokens.
    assert len([e for e in events if e["type"] == "delta"]) < 250
    assert events[0] == {"type": "status", "status": "queued"}
    assert {"type": "status", "status": "in_progress"} in events
    assert events[-2:] == [
        {"type": "status", "status": "completed"},
        {"type": "end", "status": "completed", "finish_reason": "stop"},
    ]
    job = stack.get(job_id).json()
    assert _text_after_last_reset(events) == job["output_text"]
    assert len(job["output_text"].split()) == 500
    assert pages[-1]["object"] == "chat.completion.job.events" and pages[-1]["job_id"] == job_id


def test_a_page_returns_as_soon_as_an_event_exists(stack: Stack) -> None:
    job_id = stack.submit("x", model="fake:ttft=1.0").json()["id"]
    first = stack.get(job_id, suffix="/events", wait=10).json()
    t0 = time.monotonic()
    page = stack.get(job_id, suffix="/events", cursor=first["cursor"], wait=20).json()
    while not any(e["type"] == "delta" for e in page["events"]) and not page["done"]:
        page = stack.get(job_id, suffix="/events", cursor=page["cursor"], wait=20).json()
    assert time.monotonic() - t0 < 3


def test_a_wait_with_nothing_new_returns_an_empty_page(stack: Stack) -> None:
    job_id = stack.submit("x", model="fake:ttft=3").json()["id"]
    page = stack.get(job_id, suffix="/events", wait=10).json()
    while page["events"]:
        page = stack.get(job_id, suffix="/events", cursor=page["cursor"], wait=0.3).json()
    assert page["events"] == [] and page["done"] is False and page["cursor"]


def test_the_page_after_the_end_is_done_and_empty(stack: Stack) -> None:
    job_id = stack.submit("x", wait=10).json()["id"]
    pages = _pages(stack, job_id)
    last = stack.get(job_id, suffix="/events", cursor=pages[-1]["cursor"], wait=5).json()
    assert last["done"] is True and last["events"] == [] and last["status"] == "completed"


def test_a_retry_after_partial_text_emits_reset(stack: Stack) -> None:
    model = "fake:tps=200,tokens=80,drop_after=30,fail_first=1"
    job_id = stack.submit("x", model=model).json()["id"]
    events = [e for p in _pages(stack, job_id) for e in p["events"]]
    reset_at = events.index({"type": "reset"})
    assert any(e["type"] == "delta" for e in events[:reset_at])
    job = stack.get(job_id).json()
    assert job["attempts"] == 2 and len(job["output_text"].split()) == 80
    assert _text_after_last_reset(events) == job["output_text"]


@pytest.mark.parametrize("cursor", ["abc", "1-2-3", "-1", "9" * 30])
def test_a_bad_cursor_is_400(stack: Stack, cursor: str) -> None:
    job_id = stack.submit("x").json()["id"]
    r = stack.get(job_id, suffix="/events", cursor=cursor)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_cursor"


def test_events_of_another_key_are_not_found(stack: Stack) -> None:
    job_id = stack.submit("x").json()["id"]
    assert stack.get(job_id, key=BOB_KEY, suffix="/events").status_code == 404
    r = stack.session(BOB_KEY).get(
        f"{stack.url}/v1/jobs/{job_id}/events", headers={"Accept": "text/event-stream"}, timeout=10
    )
    assert r.status_code == 404


def _sse(stack: Stack, job_id: str, last_event_id: str | None = None) -> list[tuple[str, Any]]:
    headers = {"Accept": "text/event-stream"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    url = f"{stack.url}/v1/jobs/{job_id}/events"
    out: list[tuple[str, Any]] = []
    with stack.session().get(url, headers=headers, stream=True, timeout=30) as r:
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        event_id = ""
        for line in r.iter_lines(decode_unicode=True):
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                out.append((event_id, json.loads(line[6:])))
    return out


def test_sse_streams_every_event_and_resumes_from_last_event_id(stack: Stack) -> None:
    job_id = stack.submit("x", model=STREAMED).json()["id"]
    t0 = time.monotonic()
    stream = _sse(stack, job_id)
    assert time.monotonic() - t0 > 3, "the stream should follow the job, not wait for its end"
    events = [e for _, e in stream]
    assert events[-1]["type"] == "end"
    job = stack.get(job_id).json()
    assert _text_after_last_reset(events) == job["output_text"]
    middle = len(stream) // 2
    resumed = _sse(stack, job_id, last_event_id=stream[middle][0])
    assert resumed == stream[middle + 1 :]


def test_sse_sends_keepalive_comments(stack: Stack) -> None:
    # A job that stays silent longer than the keepalive interval (2 s in the test stack).
    job_id = stack.submit("x", model="fake:ttft=6").json()["id"]
    url = f"{stack.url}/v1/jobs/{job_id}/events"
    with stack.session().get(
        url, headers={"Accept": "text/event-stream"}, stream=True, timeout=30
    ) as r:
        lines = []
        for line in r.iter_lines(decode_unicode=True):
            lines.append(line)
            if line == ": keepalive":
                break
    assert ": keepalive" in lines
    stack.session().post(f"{stack.url}/v1/jobs/{job_id}/cancel", timeout=10)


def test_sse_on_a_finished_job_replays_and_closes(stack: Stack) -> None:
    job_id = stack.submit("replay me", wait=10).json()["id"]
    stream = _sse(stack, job_id)
    events = [e for _, e in stream]
    assert _text_after_last_reset(events) == "replay me" and events[-1]["type"] == "end"
    # The last text, the last status and the end are one entry: a client cut off inside it
    # (its last id is the entry's before) gets all of it again, never the status without
    # the end.
    assert events[-2] == {"type": "status", "status": "completed"}
    replay = [e for _, e in _sse(stack, job_id, last_event_id=stream[-2][0])]
    assert replay == events[-len(replay) :] and replay[-2:] == events[-2:]
    assert [e["type"] for e in replay] in (["status", "end"], ["delta", "status", "end"])


def test_events_need_a_key(stack: Stack) -> None:
    r = requests.get(f"{stack.url}/v1/jobs/job_{'a' * 32}/events", timeout=10)
    assert r.status_code == 401
