"""The Batch API through real processes: the OpenAI SDK's round trip, invalid lines, cancel,
expiry, and the lines fed at a bounded rate behind the interactive lane."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import requests
from openai import OpenAI

from chatq import keys
from chatq.config.settings import Settings
from tests import openai_schemas
from tests.batchkit import (
    CHAT,
    content,
    get_batch,
    jsonl,
    own_stack,
    parse_output,
    request_line,
    run_batch,
    session,
    upload,
    upstream_calls,
    wait_ended,
    wait_for,
    without_nulls,
)
from tests.conftest import Stack
from tests.procs import ALICE_KEY, BOB_KEY, start_web

pytestmark = pytest.mark.long

MAX_QUEUED = 4
SLOTS = 4


@pytest.fixture(scope="module")
def batch_stack() -> Iterator[tuple[Stack, str]]:
    """One worker of 4 slots; at most 4 batch lines queued."""
    with own_stack(
        CHATQ_BATCH_MAX_QUEUED=str(MAX_QUEUED), CHATQ_WORKER_CONCURRENCY=str(SLOTS)
    ) as found:
        yield found


def _custom_ids(lines: list[Any]) -> Counter[str]:
    return Counter(line.custom_id for line in lines)


def test_the_sdk_round_trip_reads_back_in_openai_s_format(batch_stack: tuple[Stack, str]) -> None:
    stack, _ = batch_stack
    client = OpenAI(base_url=stack.url + "/v1", api_key=ALICE_KEY, max_retries=0)
    lines = [request_line(f"r{i}", f"say {i} please") for i in range(12)]
    uploaded = client.files.create(file=("prompts.jsonl", jsonl(lines)), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == len(jsonl(lines))
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h", metadata={"run": "sdk"}
    )
    assert batch.status == "validating" and batch.metadata == {"run": "sdk"}
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        batch = client.batches.retrieve(batch.id, extra_query={"wait": 20})
    assert batch.status == "completed", batch
    assert (
        batch.request_counts
        and batch.request_counts.total == 12
        and batch.request_counts.completed == 12
        and batch.request_counts.failed == 0
    )
    assert batch.error_file_id is None and batch.output_file_id
    assert batch.in_progress_at and batch.finalizing_at and batch.completed_at
    assert batch.usage and batch.usage.input_tokens > 0 and batch.usage.output_tokens > 0
    output = parse_output(client.files.content(batch.output_file_id).text)
    assert _custom_ids(output) == Counter(f"r{i}" for i in range(12))
    for line in output:
        assert line.error is None and line.id.startswith("batch_req_")
        number = line.custom_id.removeprefix("r") if line.custom_id else ""
        assert line.completion().choices[0].message.content == f"say {number} please"
    assert batch.id in [b.id for b in client.batches.list(limit=1)]  # every page, one by one
    assert {uploaded.id, batch.output_file_id} <= {f.id for f in client.files.list()}
    assert client.files.delete(batch.output_file_id).deleted is True
    with pytest.raises(openai.NotFoundError):
        client.files.content(batch.output_file_id)


def test_what_is_served_matches_openai_s_published_schemas(batch_stack: tuple[Stack, str]) -> None:
    stack, _ = batch_stack
    s = session()
    batch = run_batch(stack.url, [request_line("only", "schema")])
    openai_schemas.check("Batch", without_nulls(batch))
    ended = wait_ended(stack.url, batch["id"])
    openai_schemas.check("Batch", without_nulls(ended))
    listed = s.get(f"{stack.url}/v1/batches", params={"limit": 2}, timeout=10).json()
    openai_schemas.check("ListBatchesResponse", without_nulls(listed))
    files = s.get(f"{stack.url}/v1/files", timeout=10).json()
    openai_schemas.check("ListFilesResponse", files)
    one = s.get(f"{stack.url}/v1/files/{ended['output_file_id']}", timeout=10).json()
    openai_schemas.check("OpenAIFile", one)
    deleted = s.delete(f"{stack.url}/v1/files/{ended['output_file_id']}", timeout=10).json()
    openai_schemas.check("DeleteFileResponse", deleted)


def test_invalid_lines_are_errors_and_the_valid_ones_run(batch_stack: tuple[Stack, str]) -> None:
    stack, upstream = batch_stack
    before = upstream_calls(upstream)
    lines: list[dict[str, Any] | str] = [
        request_line("a", "first"),
        "this is not json",
        request_line(None, "no custom_id"),
        request_line("a", "same custom_id again"),
        request_line("c", "wrong url", url="/v1/embeddings"),
        request_line("d", "wrong method", method="GET"),
        {"custom_id": "e", "method": "POST", "url": CHAT, "body": {"model": "fake"}},
        "",
        request_line("b", "last"),
    ]
    batch = wait_ended(stack.url, run_batch(stack.url, lines)["id"])
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 8, "completed": 2, "failed": 6}
    found = [(e["line"], e["code"], e["param"]) for e in batch["errors"]["data"]]
    assert found == [
        (2, "invalid_json_line", None),
        (3, "missing_required_parameter", "custom_id"),
        (4, "duplicate_custom_id", "custom_id"),
        (5, "url_mismatch", "url"),
        (6, "invalid_method", "method"),
        (7, "missing_field", "body.messages"),
    ]
    output, errors = (
        content(stack.url, batch["output_file_id"]),
        content(stack.url, batch["error_file_id"]),
    )
    assert _custom_ids(output) == Counter({"a": 1, "b": 1})
    assert [(e.custom_id, e.error.code if e.error else "") for e in errors] == [
        (None, "invalid_json_line"),
        (None, "missing_required_parameter"),
        ("a", "duplicate_custom_id"),
        ("c", "url_mismatch"),
        ("d", "invalid_method"),
        ("e", "missing_field"),
    ]
    assert all(
        e.response is None and re.match(r"Line \d+: ", e.error.message) for e in errors if e.error
    )
    assert upstream_calls(upstream) - before == 2


@pytest.mark.parametrize(
    "lines,code",
    [
        (["{", request_line(None, "x")], "invalid_json_line"),
        ([], "empty_file"),
    ],
)
def test_a_batch_with_no_valid_line_fails(
    batch_stack: tuple[Stack, str], lines: list[Any], code: str
) -> None:
    stack, _ = batch_stack
    batch = wait_ended(stack.url, run_batch(stack.url, lines)["id"])
    assert batch["status"] == "failed" and batch["failed_at"] is not None
    assert batch["output_file_id"] is None
    assert batch["errors"]["data"][0]["code"] == code
    assert batch["request_counts"] == {"total": len(lines), "completed": 0, "failed": len(lines)}


def _each_line_once(url: str, batch: dict[str, Any], n: int) -> tuple[list[Any], list[Any]]:
    output, errors = content(url, batch["output_file_id"]), content(url, batch["error_file_id"])
    assert _custom_ids(output + errors) == Counter(f"x{i}" for i in range(n))
    counts = batch["request_counts"]
    assert counts == {"total": n, "completed": len(output), "failed": len(errors)}
    return output, errors


def test_cancel_stops_feeding_cancels_queued_lines_and_keeps_the_done_ones(
    batch_stack: tuple[Stack, str],
) -> None:
    stack, upstream = batch_stack
    before = upstream_calls(upstream)
    n = 30
    lines = [
        request_line(f"x{i}", f"line {i}", "fake" if i < 5 else "fake:ttft=1") for i in range(n)
    ]
    batch = run_batch(stack.url, lines)
    wait_for(stack.url, batch["id"], lambda b: b["request_counts"]["completed"] >= 5)
    cancelled = session().post(f"{stack.url}/v1/batches/{batch['id']}/cancel", timeout=10)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelling"
    assert cancelled.json()["cancelling_at"] is not None
    batch = wait_ended(stack.url, batch["id"])
    assert batch["status"] == "cancelled" and batch["cancelled_at"] is not None
    output, errors = _each_line_once(stack.url, batch, n)
    assert 5 <= len(output) <= 5 + MAX_QUEUED + SLOTS
    assert {e.error.code for e in errors if e.error} == {"batch_cancelled"}
    # Lines that were running finished; lines queued or still in the file never ran.
    assert upstream_calls(upstream) - before == len(output)
    again = session().post(f"{stack.url}/v1/batches/{batch['id']}/cancel", timeout=10)
    assert again.json()["status"] == "cancelled"


def test_a_batch_expires_at_its_window_s_end_with_partial_output(
    batch_stack: tuple[Stack, str],
) -> None:
    stack, upstream = batch_stack
    short, url = start_web({**stack.env, "CHATQ_BATCH_WINDOW": "6"})
    try:
        n = 20
        # Three quick lines, then lines that would stream for 100 s.
        slow = "fake:tps=1,tokens=100"
        lines = [request_line(f"x{i}", f"line {i}", "fake" if i < 3 else slow) for i in range(n)]
        before = upstream_calls(upstream)
        batch = run_batch(url, lines)
        assert batch["expires_at"] - batch["created_at"] in (5, 6, 7)
        batch = wait_ended(url, batch["id"])
        assert batch["status"] == "expired" and batch["expired_at"] is not None
        output, errors = _each_line_once(url, batch, n)
        assert _custom_ids(output) == Counter({"x0": 1, "x1": 1, "x2": 1})
        assert {e.error.code for e in errors if e.error} == {"batch_expired"}
        # The slow lines that had started were stopped; no line was sent twice.
        assert 3 < upstream_calls(upstream) - before <= 3 + SLOTS
    finally:
        short.stop()


def test_files_and_batches_are_their_owner_s_only(batch_stack: tuple[Stack, str]) -> None:
    from tests.procs import BOB_KEY

    stack, _ = batch_stack
    file_id = upload(stack.url, jsonl([request_line("q", "mine")])).json()["id"]
    batch = run_batch(stack.url, [request_line("q", "mine")])
    bob = session(BOB_KEY)
    for path in (
        f"/v1/files/{file_id}",
        f"/v1/files/{file_id}/content",
        f"/v1/batches/{batch['id']}",
    ):
        r = bob.get(stack.url + path, timeout=10)
        assert r.status_code == 404 and r.json()["error"]["code"] in (
            "file_not_found",
            "batch_not_found",
        ), path
    assert bob.delete(f"{stack.url}/v1/files/{file_id}", timeout=10).status_code == 404
    assert bob.post(f"{stack.url}/v1/batches/{batch['id']}/cancel", timeout=10).status_code == 404
    r = bob.post(
        f"{stack.url}/v1/batches",
        json={"input_file_id": file_id, "endpoint": CHAT, "completion_window": "24h"},
        timeout=10,
    )
    assert r.status_code == 404 and r.json()["error"]["param"] == "input_file_id"
    assert file_id not in {
        f["id"] for f in bob.get(f"{stack.url}/v1/files", timeout=10).json()["data"]
    }
    # Bob's own batches (another test of the module's stack may have made some) only.
    bobs = bob.get(f"{stack.url}/v1/batches", timeout=10).json()["data"]
    assert batch["id"] not in {b["id"] for b in bobs}
    wait_ended(stack.url, batch["id"])


def test_a_file_a_running_batch_reads_cannot_be_deleted(batch_stack: tuple[Stack, str]) -> None:
    stack, _ = batch_stack
    batch = run_batch(stack.url, [request_line("slow", "x", "fake:ttft=1")])
    url = f"{stack.url}/v1/files/{batch['input_file_id']}"
    r = session().delete(url, timeout=10)
    assert r.status_code == 409 and r.json()["error"]["code"] == "file_in_use"
    wait_ended(stack.url, batch["id"])
    assert session().delete(url, timeout=10).json()["deleted"] is True
    assert session().get(url, timeout=10).status_code == 404


def _started_at(stack: Stack, job_id: str) -> float:
    return float(stack.redis.hget(keys.job(job_id), "started_at") or 0)


def test_lines_are_fed_at_a_bounded_rate_behind_the_interactive_lane() -> None:
    """One slot, at most 3 lines queued, a queue cap of 5 that 10 lines would pass."""
    with own_stack(
        CHATQ_BATCH_MAX_QUEUED="3", CHATQ_WORKER_CONCURRENCY="1", CHATQ_MAX_QUEUE_DEPTH="5"
    ) as (stack, _):
        n = 10
        # Lines of 1 s: the feeder's turns come every 0.5 s, and with lines of 0.5 s each turn
        # could land between a line's end and its accounting, keeping 2 lines fed, not 3.
        batch = run_batch(
            stack.url, [request_line(f"x{i}", f"l{i}", "fake:ttft=1") for i in range(n)]
        )
        queue_url = f"{stack.url}/v1/queue"

        def queued_behind_a_running_line(_: Any) -> bool:
            q = session().get(queue_url, timeout=10).json()
            depth = q["queues"]["batch"]["depth"]
            assert depth <= 3, q
            # A fed line out of the queue is the worker's: exact, where `in_progress` is the
            # workers' last heartbeats, up to 0.5 s old.
            return bool(depth >= 2 and q["batches"]["lines"]["fed"] > depth)

        wait_for(stack.url, batch["id"], queued_behind_a_running_line)
        submitted = stack.submit("me first")
        assert submitted.status_code == 202, submitted.text  # not 503 queue_full
        job = stack.get(submitted.json()["id"], wait=30).json()
        q = session().get(queue_url, timeout=10).json()
        lines = q["batches"]["lines"]
        assert q["batches"]["active"] == 1 and lines["total"] == n
        assert lines["waiting_in_file"] + lines["fed"] + lines["done"] == n
        metrics = requests.get(f"{stack.url}/metrics", timeout=10).text
        assert re.search(r'^chatq_batch_lines\{state="waiting_in_file"\} \d', metrics, re.M)
        assert re.search(r"^chatq_batches_active 1\.0$", metrics, re.M)
        ended = wait_ended(stack.url, batch["id"])
        assert ended["request_counts"]["completed"] == n
        output = content(stack.url, ended["output_file_id"])
        starts = [_started_at(stack, line.response.request_id) for line in output if line.response]
        # The interactive job went before every line queued when it came, but the one a
        # freed slot may have taken as it was being sent.
        overtaken = [t for t in starts if job["created_at"] < t < job["started_at"]]
        assert len(overtaken) <= 1, (job, sorted(starts))
        worker = next(p for p in stack.procs if p.name == "worker")
        bind = worker.env["CHATQ_WORKER_METRICS_BIND"]
        counted = requests.get(f"http://{bind}/metrics", timeout=10).text
        assert re.search(rf"^chatq_batch_lines_fed_total {n}\.0$", counted, re.M)
        assert re.search(
            rf'^chatq_batch_lines_done_total{{outcome="completed"}} {n}\.0$', counted, re.M
        )
        idle = session().get(queue_url, timeout=10).json()["batches"]
        assert idle == {
            "active": 0,
            "lines": {"total": 0, "waiting_in_file": 0, "fed": 0, "done": 0},
        }


def _fed_order(stack: Stack, url: str, batch: dict[str, Any], key: str) -> list[tuple[float, str]]:
    """(time its job was made, custom_id) of each line of an ended batch."""
    lines = content(url, batch["output_file_id"], key)
    made = [
        stack.redis.hget(keys.job(line.response.request_id), "created_at")
        for line in lines
        if line.response
    ]
    return [(float(t or 0), str(line.custom_id)) for t, line in zip(made, lines, strict=True)]


def test_a_small_batch_behind_a_big_one_of_another_key_is_fed_in_turn_with_it(
    batch_stack: tuple[Stack, str],
) -> None:
    """Alice's 40 lines fill the bound (4 lines in flight) before bob's 8-line batch comes:
    bob's lines are fed as room frees up, in turn with alice's, whichever id sorts first."""
    stack, _ = batch_stack
    model = "fake:ttft=0.3"
    alice = run_batch(stack.url, [request_line(f"a{i}", "x", model) for i in range(40)])

    def alice_fills_the_bound(batch: dict[str, Any]) -> bool:
        lines = session().get(f"{stack.url}/v1/queue", timeout=10).json()["batches"]["lines"]
        return bool(lines["fed"] >= 4)

    wait_for(stack.url, alice["id"], alice_fills_the_bound)
    bob = run_batch(stack.url, [request_line(f"b{i}", "y", model) for i in range(8)], BOB_KEY)
    bob = wait_ended(stack.url, bob["id"], key=BOB_KEY)
    alice = wait_ended(stack.url, alice["id"])
    assert (alice["request_counts"]["completed"], bob["request_counts"]["completed"]) == (40, 8)
    order = [
        name[0]
        for _, name in sorted(
            _fed_order(stack, stack.url, alice, ALICE_KEY)
            + _fed_order(stack, stack.url, bob, BOB_KEY)
        )
    ]
    first, last = order.index("b"), len(order) - 1 - order[::-1].index("b")
    # Id order fed one batch whole before the other: bob's after alice's 40 lines, or
    # bob's 8 in a row.
    assert "a" in order[first:last], "".join(order)
    assert order[last:].count("a") >= 8, "".join(order)


def test_a_line_s_upstream_error_is_an_error_line_with_its_status(
    batch_stack: tuple[Stack, str],
) -> None:
    stack, _ = batch_stack
    batch = wait_ended(
        stack.url,
        run_batch(
            stack.url, [request_line("ok", "fine"), request_line("bad", "no", "fake:status=400")]
        )["id"],
    )
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
    [error] = content(stack.url, batch["error_file_id"])
    assert error.custom_id == "bad" and error.error is None and error.response is not None
    assert error.response.status_code == 400
    assert error.response.body["error"]["code"] == "upstream_error"
    assert get_batch(stack.url, batch["id"])["usage"]["total_tokens"] > 0


def test_a_chunked_upload_over_the_body_limit_is_streamed_whole(
    batch_stack: tuple[Stack, str],
) -> None:
    stack, _ = batch_stack
    data = jsonl([request_line(f"c{i}", "w" * 1000) for i in range(2500)])
    assert len(data) > 2 * Settings().max_body_bytes  # the stack's CHATQ_MAX_BODY_BYTES
    boundary = "chunky"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="big.jsonl"\r\n\r\n'
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body() -> Iterator[bytes]:  # no Content-Length: sent chunked
        yield head
        for start in range(0, len(data), 100_000):
            yield data[start : start + 100_000]
        yield tail

    r = session().post(
        f"{stack.url}/v1/files",
        data=body(),
        timeout=60,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["bytes"] == len(data)
    got = session().get(f"{stack.url}/v1/files/{r.json()['id']}/content", timeout=60)
    assert got.content == data
