"""Each key's file quota (CHATQ_FILES_MAX_BYTES_PER_KEY, CHATQ_FILES_MAX_COUNT_PER_KEY): an
upload past it is refused, a deleted, expired or refused file gives its room back, a batch's
output files count; in process on a Redis of its own, and across two real web processes."""

from __future__ import annotations

import contextlib
import io
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from chatq import keys
from chatq.batches import record as batches
from chatq.batches.file_quota import STEP_BYTES, FileQuota, Hold
from chatq.batches.file_records import FileIndex
from chatq.batches.record import BatchStore
from chatq.config.settings import Settings
from scripts.localredis import LocalRedis
from tests.batchkit import CHAT, jsonl, request_line
from tests.inproc import in_process
from tests.procs import ALICE_KEY, BOB_KEY, base_env, start_web, stop_all, wait_until

ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
BOB = {"Authorization": f"Bearer {BOB_KEY}"}
MAX_COUNT = 3
MAX_BYTES = 3000


@pytest.fixture(scope="module")
def server() -> Iterator[LocalRedis]:
    local = LocalRedis().start()
    yield local
    local.stop()


@pytest.fixture(scope="module")
def app(server: LocalRedis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flask]:
    settings = Settings(
        redis_url=server.url,
        api_keys=(("alice", ALICE_KEY), ("bob", BOB_KEY)),
        default_model="fake",
        files_dir=str(tmp_path_factory.mktemp("files")),
        files_max_bytes=2500,
        files_max_lines=5,
        files_max_bytes_per_key=MAX_BYTES,
        files_max_count_per_key=MAX_COUNT,
    )
    with in_process(settings) as app:
        yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    app.extensions["chatq"].redis.flushall()
    return app.test_client()


def _redis(client: FlaskClient) -> redis.Redis:
    found: redis.Redis = client.application.extensions["chatq"].redis
    return found


def _quota(client: FlaskClient) -> FileQuota:
    found: FileQuota = client.application.extensions["chatq_batches"].quota
    return found


def _file(size_bytes: int) -> bytes:
    """A one-line JSONL file of exactly `size_bytes`."""
    line = jsonl([request_line("a", "")])
    pad = size_bytes - len(line)
    assert pad >= 0
    return jsonl([request_line("a", "x" * pad)])


def _upload(client: FlaskClient, data: bytes, headers: dict[str, str] = ALICE) -> TestResponse:
    form = {"purpose": "batch", "file": (io.BytesIO(data), "in.jsonl")}
    return client.post("/v1/files", data=form, headers=headers, content_type="multipart/form-data")


def _refused(r: TestResponse, code: str) -> None:
    assert r.status_code == 400, r.get_data(as_text=True)
    error = r.get_json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, "file")


def _listed(client: FlaskClient, headers: dict[str, str] = ALICE) -> list[str]:
    return [f["id"] for f in client.get("/v1/files", headers=headers).get_json()["data"]]


def test_a_key_keeps_at_most_its_count_of_files_and_a_deleted_one_gives_its_place_back(
    client: FlaskClient,
) -> None:
    made = [_upload(client, _file(200)).get_json()["id"] for _ in range(MAX_COUNT)]
    _refused(_upload(client, _file(200)), "files_count_quota_exceeded")
    assert sorted(_listed(client)) == sorted(made)
    assert _upload(client, _file(200), BOB).status_code == 200  # a quota per key
    assert client.delete(f"/v1/files/{made[0]}", headers=ALICE).status_code == 200
    assert _upload(client, _file(200)).status_code == 200
    assert _quota(client).usage("alice").count == MAX_COUNT


def test_an_upload_past_the_key_s_bytes_is_refused_and_one_that_fits_exactly_is_not(
    client: FlaskClient,
) -> None:
    assert _upload(client, _file(2000)).status_code == 200
    _refused(_upload(client, _file(1001)), "files_bytes_quota_exceeded")
    assert _upload(client, _file(1000)).status_code == 200
    usage = _quota(client).usage("alice")
    assert (usage.bytes, usage.count, usage.held_bytes, usage.held_count) == (MAX_BYTES, 2, 0, 0)
    assert len(_listed(client)) == 2


def test_an_upload_refused_for_its_content_gives_its_hold_back(client: FlaskClient) -> None:
    too_many_lines = jsonl([request_line(f"c{i}", "y") for i in range(6)])
    r = _upload(client, too_many_lines)
    assert r.status_code == 400 and r.get_json()["error"]["param"] == "file"
    assert _quota(client).usage("alice") == _quota(client).usage("nobody-at-all")
    for size in (1000, 1000, 1000):  # the whole quota is still there
        assert _upload(client, _file(size)).status_code == 200


def test_an_expired_file_the_janitor_removes_gives_its_room_back(client: FlaskClient) -> None:
    file_id = _upload(client, _file(2000)).get_json()["id"]
    _refused(_upload(client, _file(2000)), "files_bytes_quota_exceeded")
    past = time.time() - 10
    _redis(client).hset(keys.file_meta(file_id), "expires_at", repr(past))
    assert FileIndex(_redis(client)).expire(file_id) == "deleted"  # the janitor's step
    assert _quota(client).usage("alice").bytes == 0
    assert _upload(client, _file(2000)).status_code == 200


def test_the_hold_of_an_upload_whose_web_died_lapses(client: FlaskClient) -> None:
    quota = _quota(client)
    assert quota.hold("alice", "file-died-mid-upload-0001", MAX_BYTES, MAX_BYTES) == MAX_BYTES
    _refused(_upload(client, _file(200)), "files_bytes_quota_exceeded")
    # Its time runs out (moved, not waited for): the next upload's step lets it go.
    _redis(client).zadd(keys.files_hold_until("alice"), {"file-died-mid-upload-0001": 0})
    assert _upload(client, _file(200)).status_code == 200
    usage = quota.usage("alice")
    assert (usage.bytes, usage.held_bytes, usage.held_count) == (len(_file(200)), 0, 0)


def test_uploads_in_progress_share_the_key_s_room_as_their_bytes_arrive(
    client: FlaskClient,
) -> None:
    quota = FileQuota(_redis(client), 3 * STEP_BYTES, 10)
    first, second = (Hold(quota, "carol", f"file-upload-{n}-000000000000", 10**9) for n in (1, 2))
    first.start(0, None)  # no declared size: a first step
    second.start(0, None)
    assert first.held_bytes == second.held_bytes == STEP_BYTES
    first.cover(STEP_BYTES + 1)  # asks ahead: all the room there is, not more
    assert first.held_bytes == 2 * STEP_BYTES
    second.cover(STEP_BYTES)
    with pytest.raises(Exception, match="storage quota") as refused:
        second.cover(STEP_BYTES + 1)
    assert getattr(refused.value, "code", "") == "files_bytes_quota_exceeded"
    first.release()
    second.cover(STEP_BYTES + 1)
    assert quota.usage("carol").held_count == 1


def test_a_batch_s_output_files_count_and_are_never_refused(client: FlaskClient) -> None:
    input_id = _upload(client, _file(2000)).get_json()["id"]
    store = BatchStore(_redis(client), 3600)
    record = batches.new_record(
        batch_id=batches.new_batch_id(),
        owner="alice",
        endpoint=CHAT,
        input_file_id=input_id,
        metadata=None,
        output_expires_s=3600,
    )
    assert store.create(record, 3600.0, max_active=100) == "created"
    assert store.lease(record["id"], "w", 10.0)
    output_id = "file-" + "o" * 32
    written = [("output_file_id", output_id, 1500, 3, "out.jsonl", 3600)]
    assert store.finish(record["id"], "w", batches.COMPLETED, written) == batches.COMPLETED
    usage = _quota(client).usage("alice")
    assert (usage.bytes, usage.count) == (3500, 2)  # past the quota: the batch was accepted
    _refused(_upload(client, _file(200)), "files_bytes_quota_exceeded")
    assert client.delete(f"/v1/files/{output_id}", headers=ALICE).status_code == 200
    assert _quota(client).usage("alice").bytes == 2000
    assert _upload(client, _file(1000)).status_code == 200


# --- Across processes: two webs, uploads in progress at once ----------------------------------

BOUNDARY = "quota-test-boundary"
UPLOADS = 8
FILE_BYTES = 256 * 1024  # past the first chunk the web reads: its hold is taken, it waits


def _body() -> tuple[bytes, bytes]:
    """A multipart upload cut in two: up to the middle of its file, and the rest."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
        "Content-Type: application/jsonl\r\n\r\n"
    ).encode()
    body = head + _file(FILE_BYTES) + f"\r\n--{BOUNDARY}--\r\n".encode()
    cut = len(head) + FILE_BYTES // 2
    return body[:cut], body[cut:]


def _start_upload(url: str, first: bytes, total_bytes: int) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(
        (
            f"POST /v1/files HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ALICE_KEY}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
            f"Content-Length: {total_bytes}\r\nConnection: close\r\n\r\n"
        ).encode()
        + first
    )
    return sock


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and the whole answer; a web that answered before reading the whole body
    resets the connection after its answer."""
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    sock.close()
    return int(data.split(b" ", 2)[1]), data


def _answered(socks: list[socket.socket]) -> list[socket.socket]:
    return select.select(socks, [], [], 0)[0]


def test_uploads_in_progress_on_two_webs_hold_the_key_s_room_together(
    fakellm: str, tmp_path: Path
) -> None:
    server = LocalRedis().start()
    env = base_env(
        server.url,
        fakellm,
        CHATQ_FILES_DIR=str(tmp_path / "files"),
        CHATQ_FILES_MAX_COUNT_PER_KEY=str(MAX_COUNT),
    )
    procs: list[Any] = []
    try:
        for _ in range(2):
            procs.append(start_web(env))
        first, rest = _body()
        socks = [
            _start_upload(procs[i % 2][1], first, len(first) + len(rest)) for i in range(UPLOADS)
        ]
        usage = keys.files_usage("alice")
        client = redis.Redis.from_url(server.url)
        wait_until(
            lambda: (
                client.hget(usage, "held_count") == str(MAX_COUNT).encode()
                and len(_answered(socks)) == UPLOADS - MAX_COUNT
            ),
            60,
            "every upload held or refused",
        )
        refused = _answered(socks)
        for sock in refused:
            status, data = _answer(sock)
            assert status == 400 and b"files_count_quota_exceeded" in data, data
        held = [s for s in socks if s not in refused]
        for sock in held:
            sock.sendall(rest)
        assert [_answer(sock)[0] for sock in held] == [200] * MAX_COUNT
        assert client.zcard(keys.files_of("alice")) == MAX_COUNT
        assert client.hmget(usage, "count", "held_count") == [str(MAX_COUNT).encode(), b"0"]
    finally:
        stop_all([proc for proc, _ in procs])
        server.stop()
