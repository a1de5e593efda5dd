"""The Responses API against a running stack, through the official `openai` SDK: background
create, retrieve, cancel, delete, streams resumed after any sequence number; every object
and event validated strictly against OpenAI's published schemas."""

from __future__ import annotations

import json
import uuid
from typing import Any

import openai

from chatq import keys
from tests import openai_schemas
from tests.conftest import Stack
from tests.procs import ALICE_KEY, BOB_KEY, wait_until

SLOW = "fake:ttft=0.2,tps=40,tokens=30"


def _client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key=ALICE_KEY, max_retries=0, timeout=60)


def _check(response: Any) -> dict[str, Any]:
    """The Response as JSON, validated strictly."""
    body = (
        response
        if isinstance(response, dict)
        else response.model_dump(mode="json", exclude_unset=True)
    )
    openai_schemas.check("Response", body)
    return dict(body)


def _sse(lines: list[str]) -> list[dict[str, Any]]:
    events, kind = [], ""
    for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            event = json.loads(line[6:])
            assert event["type"] == kind
            events.append(event)
    return events


def _raw_stream(stack: Stack, rid: str, **query: Any) -> list[dict[str, Any]]:
    """GET /v1/responses/{id}?stream=true: its events, each validated strictly."""
    r = stack.session().get(
        f"{stack.url}/v1/responses/{rid}",
        params={"stream": "true", **query},
        stream=True,
        timeout=60,
    )
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = _sse(list(r.iter_lines(decode_unicode=True)))
    for event in events:
        openai_schemas.check(openai_schemas.RESPONSE_EVENT_SCHEMAS[event["type"]], event)
        openai_schemas.check("ResponseStreamEvent", event)
    return events


def _deltas(events: list[Any]) -> str:
    return "".join(
        e["delta"] if isinstance(e, dict) else e.delta
        for e in events
        if (e["type"] if isinstance(e, dict) else e.type) == "response.output_text.delta"
    )


def _job(stack: Stack, rid: str) -> dict[str, Any]:
    return dict(stack.get("job_" + rid.removeprefix("resp_")).json())


def test_background_create_answers_queued_then_retrieve_waits_for_the_end(stack: Stack) -> None:
    client = _client(stack)
    raw = client.responses.with_raw_response.create(
        model=SLOW, input="background please", background=True, metadata={"k": "v"}
    )
    created = raw.parse()
    assert created.status == "queued" and created.background is True
    assert raw.headers["Chatq-Job-Id"] == "job_" + created.id.removeprefix("resp_")
    _check(json.loads(raw.content))
    done = client.responses.retrieve(created.id, extra_query={"wait": 30})
    body = _check(done)
    assert done.status == "completed" and len(done.output_text.split()) == 30
    assert body["metadata"] == {"k": "v"} and body["completed_at"] is not None
    assert done.usage is not None and done.usage.output_tokens == 30
    assert done.usage.total_tokens == done.usage.input_tokens + 30
    job = _job(stack, created.id)
    assert (job["status"], job["output_text"]) == ("completed", done.output_text)


def test_without_background_the_request_is_held_until_the_response_ends(stack: Stack) -> None:
    raw = _client(stack).responses.with_raw_response.create(
        model="fake", input="held answer", instructions="Repeat."
    )
    held = raw.parse()
    assert held.status == "completed" and held.output_text == "held answer"
    assert held.instructions == "Repeat."
    _check(json.loads(raw.content))


def test_prefer_wait_bounds_the_hold(stack: Stack) -> None:
    r = stack.session().post(
        f"{stack.url}/v1/responses",
        json={"model": "fake:ttft=5", "input": "not yet"},
        headers={"Prefer": "wait=0.2"},
        timeout=30,
    )
    assert r.status_code == 200 and r.headers["Preference-Applied"] == "wait=0.2"
    assert r.json()["status"] in ("queued", "in_progress")
    _check(r.json())
    _client(stack).responses.cancel(r.json()["id"])


def test_an_answer_cut_at_max_output_tokens_is_incomplete(stack: Stack) -> None:
    client = _client(stack)
    cut = client.responses.create(model="fake:tokens=40", input="long", max_output_tokens=16)
    _check(cut)
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"
    assert cut.output[0].status == "incomplete" and len(cut.output_text.split()) == 16
    events = _raw_stream(stack, cut.id)
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_a_failed_job_is_a_failed_response_answered_200(stack: Stack) -> None:
    failed = _client(stack).responses.create(model="fake:status=400", input="refused")
    _check(failed)
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.code == "invalid_prompt"
    assert failed.error.message.startswith("upstream_error: ")
    assert _raw_stream(stack, failed.id)[-1]["type"] == "response.failed"


def test_a_created_stream_validates_and_numbers_its_events_from_zero(stack: Stack) -> None:
    r = stack.session().post(
        f"{stack.url}/v1/responses",
        json={"model": SLOW, "input": "stream me", "stream": True},
        stream=True,
        timeout=60,
    )
    assert r.headers["Content-Type"].startswith("text/event-stream")
    events = _sse(list(r.iter_lines(decode_unicode=True)))
    for event in events:
        openai_schemas.check(openai_schemas.RESPONSE_EVENT_SCHEMAS[event["type"]], event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:5] == [
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]["response"]
    assert _deltas(events) == events[-4]["text"] == final["output_text"]
    assert len(final["output_text"].split()) == 30
    assert _raw_stream(stack, final["id"]) == events  # replayed after the end: the same
    with _client(stack).responses.stream(model="fake", input="the sdk streams it") as stream:
        assert _deltas(list(stream)) == "the sdk streams it"
        assert stream.get_final_response().output_text == "the sdk streams it"


def test_a_stream_resumed_after_any_number_gives_the_same_events_and_text(stack: Stack) -> None:
    client = _client(stack)
    rid = client.responses.create(model=SLOW, input="resume me", background=True).id
    first = []
    with client.responses.stream(response_id=rid) as stream:
        for event in stream:
            first.append(event)
            if len(first) == 8:
                break  # the connection is cut here
    cut_at = first[-1].sequence_number
    with client.responses.stream(response_id=rid, starting_after=cut_at) as stream:
        rest = list(stream)
        final = stream.get_final_response()
    whole = _raw_stream(stack, rid)
    assert [e.sequence_number for e in first + rest] == [e["sequence_number"] for e in whole]
    assert _deltas(first + rest) == _deltas(whole) == final.output_text
    assert final.output_text == client.responses.retrieve(rid).output_text
    assert len(final.output_text.split()) == 30
    for after in (-1, 0, cut_at, len(whole) - 2, len(whole) - 1):
        assert _raw_stream(stack, rid, starting_after=after) == whole[after + 1 :]
    sent = list(client.responses.retrieve(rid, stream=True, starting_after=cut_at))
    assert [e.sequence_number for e in sent] == [e["sequence_number"] for e in whole[cut_at + 1 :]]


def test_a_restarted_generation_closes_the_first_message_and_starts_another(stack: Stack) -> None:
    # The first attempt is cut after 3 streamed tokens; the retry starts the text again.
    model = "fake:tps=20,drop_after=3,tokens=10,fail_first=1"
    client = _client(stack)
    rid = client.responses.create(model=model, input=f"reset {uuid.uuid4()}", background=True).id
    with client.responses.stream(response_id=rid) as stream:
        events = list(stream)
        final = stream.get_final_response()
    whole = _raw_stream(stack, rid)
    done = [e for e in whole if e["type"] == "response.output_item.done"]
    assert [(e["output_index"], e["item"]["status"]) for e in done] == [
        (0, "incomplete"),
        (1, "completed"),
    ]
    token = rid.removeprefix("resp_")
    assert [e["item"]["id"] for e in done] == [f"msg_{token}", f"msg_{token}_1"]
    retrieved = client.responses.retrieve(rid)
    assert final.output_text == retrieved.output_text == done[1]["item"]["content"][0]["text"]
    assert len(retrieved.output_text.split()) == 10
    first_text = done[0]["item"]["content"][0]["text"]
    assert first_text and retrieved.output_text.startswith(first_text)
    assert _deltas(events) == _deltas(whole) == first_text + retrieved.output_text
    assert whole[-1]["response"]["output"] == [done[1]["item"]]


def test_a_silence_past_the_keepalive_interval_does_not_break_the_sdks_stream(
    stack: Stack,
) -> None:
    # The stack's keepalive is 2 s: the comment falls between events that carry an `id:`,
    # which the SDK's parser keeps; a blank line after the comment made it parse empty data.
    client = _client(stack)
    model = "fake:ttft=2.5,tps=1,tokens=2"
    rid = client.responses.create(model=model, input="keep me alive", background=True).id
    with client.responses.stream(response_id=rid) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert final.status == "completed" and final.output_text
    assert _deltas(events) == final.output_text


def test_cancel_ends_the_response_and_its_stream(stack: Stack) -> None:
    client = _client(stack)
    rid = client.responses.create(model="fake:ttft=30", input="cancel me", background=True).id
    cancelled = client.responses.cancel(rid)
    _check(cancelled)
    assert cancelled.status == "cancelled"
    assert client.responses.retrieve(rid).status == "cancelled"
    events = _raw_stream(stack, rid)
    assert [e["type"] for e in events[:2]] == ["response.created", "response.queued"]
    assert not [e for e in events if e["type"].startswith("response.output")]
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["status"] == "cancelled"


def test_delete_of_a_running_response_removes_it_for_good(stack: Stack) -> None:
    client = _client(stack)
    rid = client.responses.create(
        model="fake:tps=10,tokens=100", input="delete me", background=True
    ).id
    job_id = "job_" + rid.removeprefix("resp_")
    page = stack.get(job_id, suffix="/events", wait=20, cursor="0")
    while not any(e.get("type") == "delta" for e in page.json()["events"]):
        page = stack.get(job_id, suffix="/events", wait=20, cursor=page.json()["cursor"])
    assert client.responses.delete(rid) is None
    job_keys = (keys.job(job_id), keys.text(job_id), keys.events(job_id))
    assert not stack.redis.exists(*job_keys)
    worker = stack.procs[0]
    wait_until(lambda: f"job {job_id} stopped" in worker.log_text(), 20, "the worker to stop")
    assert not stack.redis.exists(*job_keys)
    assert stack.redis.zscore(keys.leases_of(job_id), job_id) is None
    assert stack.session().get(f"{stack.url}/v1/responses/{rid}", timeout=10).status_code == 404


def test_previous_response_id_continues_the_conversation_without_its_instructions(
    stack: Stack,
) -> None:
    client = _client(stack)
    first = client.responses.create(model="fake", input="first words", instructions="Be terse.")
    second = client.responses.create(
        model="fake", input="second words", previous_response_id=first.id, instructions="Be kind."
    )
    assert second.previous_response_id == first.id and second.output_text == "second words"
    third = client.responses.create(model="fake", input="third", previous_response_id=second.id)
    record = stack.redis.hget(keys.job("job_" + third.id.removeprefix("resp_")), "request")
    assert json.loads(record or "{}")["messages"] == [
        {"role": "user", "content": "first words"},
        {"role": "assistant", "content": "first words"},
        {"role": "user", "content": "second words"},
        {"role": "assistant", "content": "second words"},
        {"role": "user", "content": "third"},
    ]


def test_store_false_answers_once_then_keeps_nothing(stack: Stack) -> None:
    held = _client(stack).responses.create(model="fake", input="forget me", store=False)
    assert held.status == "completed" and held.output_text == "forget me"
    job_id = "job_" + held.id.removeprefix("resp_")
    assert not stack.redis.exists(keys.job(job_id), keys.events(job_id), keys.text(job_id))
    r = stack.session().post(
        f"{stack.url}/v1/responses",
        json={"model": "fake", "input": "stream and forget", "store": False, "stream": True},
        stream=True,
        timeout=30,
    )
    events = _sse(list(r.iter_lines(decode_unicode=True)))
    assert events[-1]["response"]["output_text"] == "stream and forget"
    job_id = r.headers["Chatq-Job-Id"]
    assert not stack.redis.exists(keys.job(job_id))
    assert (
        stack.session()
        .get(f"{stack.url}/v1/responses/{events[-1]['response']['id']}", timeout=10)
        .status_code
        == 404
    )


def test_an_identical_deterministic_response_is_answered_from_the_cache(stack: Stack) -> None:
    client = _client(stack)
    text = f"cache {uuid.uuid4()}"
    first = client.responses.create(model="fake", input=text, temperature=0)
    again = client.responses.create(model="fake", input=text, temperature=0, background=True)
    assert again.status == "completed" and again.output_text == first.output_text
    assert _job(stack, again.id)["cached"] is True
    events = _raw_stream(stack, again.id)
    assert [e["type"] for e in events][:3] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
    ]
    assert events[-1]["response"]["output_text"] == text


def test_a_cut_chat_completion_is_fetched_again_by_its_job_id(stack: Stack) -> None:
    client = _client(stack)
    raw = client.chat.completions.with_raw_response.create(
        model="fake", messages=[{"role": "user", "content": "fetch me again"}]
    )
    again = client.chat.completions.retrieve(raw.headers["Chatq-Job-Id"])
    assert again.model_dump() == raw.parse().model_dump()
    chunks = list(
        client.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "streamed"}], stream=True
        )
    )
    assert client.chat.completions.retrieve(chunks[0].id).choices[0].message.content == "streamed"


def test_a_stored_completion_not_yet_done_is_held_or_answered_202_when_asked(stack: Stack) -> None:
    job_id = stack.submit("slow one", model="fake:ttft=0.5").json()["id"]
    s = stack.session()
    pending = s.get(
        f"{stack.url}/v1/chat/completions/{job_id}", headers={"Prefer": "wait=0.1"}, timeout=30
    )
    assert pending.status_code == 202 and pending.json()["id"] == job_id
    held = s.get(f"{stack.url}/v1/chat/completions/{job_id}", timeout=30)
    assert held.status_code == 200 and held.json()["choices"][0]["message"]["content"] == "slow one"
    failed = stack.submit("no", model="fake:status=400", wait=20).json()["id"]
    r = s.get(f"{stack.url}/v1/chat/completions/{failed}", timeout=30)
    assert (r.status_code, r.headers["x-should-retry"]) == (400, "false")
    openai_schemas.check("ErrorResponse", r.json())
    unknown = s.get(f"{stack.url}/v1/chat/completions/chatcmpl-{'A' * 32}", timeout=10)
    assert unknown.status_code == 404
    foreign = stack.session(BOB_KEY).get(f"{stack.url}/v1/chat/completions/{job_id}", timeout=10)
    assert foreign.status_code == 404


def test_a_stream_followed_while_its_response_is_deleted_ends_cleanly(stack: Stack) -> None:
    client = _client(stack)
    rid = client.responses.create(
        model="fake:tps=10,tokens=100", input="deleted under me", background=True
    ).id
    r = stack.session().get(
        f"{stack.url}/v1/responses/{rid}", params={"stream": "true"}, stream=True, timeout=60
    )
    lines: list[str] = []
    stream = r.iter_lines(decode_unicode=True)
    for line in stream:
        lines.append(line)
        if line == "event: response.output_text.delta":
            client.responses.delete(rid)
            break
    events = _sse(lines + list(stream))  # read on to the end of the stream
    for event in events:
        openai_schemas.check(openai_schemas.RESPONSE_EVENT_SCHEMAS[event["type"]], event)
    last = events[-1]
    # Either the cancel that comes first was read to its end, or the keys were already gone.
    assert (last["type"], last.get("code") or last.get("response", {}).get("status")) in (
        ("response.incomplete", "cancelled"),
        ("error", "response_not_found"),
    ), last
