"""Malformed Files and Batches requests get the API's error object, in process (create_app(...)
.test_client(), no server) on a Redis of their own; no worker runs."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from chatq import keys
from chatq.batches.record import BatchStore
from chatq.config.settings import Settings
from scripts.localredis import LocalRedis
from tests.batchkit import CHAT, jsonl, request_line
from tests.inproc import in_process

KEY = "sk-inprocess-batches-5e1d"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_FILE_BYTES = 4000
MAX_LINES = 5


@pytest.fixture(scope="module")
def files_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("files")


@pytest.fixture(scope="module")
def client(files_dir: Path) -> Iterator[FlaskClient]:
    server = LocalRedis().start()
    settings = Settings(
        redis_url=server.url,
        api_keys=(("alice", KEY),),
        default_model="fake",
        max_body_bytes=1024,
        files_dir=str(files_dir),
        files_max_bytes=MAX_FILE_BYTES,
        files_max_lines=MAX_LINES,
    )
    with in_process(settings) as app:
        yield app.test_client()
    server.stop()


def _error(r: TestResponse, status: int, code: str, param: str | None = "") -> dict[str, Any]:
    assert r.status_code == status, r.get_data(as_text=True)
    body = r.get_json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == code, body
    if param != "":
        assert body["error"]["param"] == param, body
    return dict(body["error"])


def _upload(client: FlaskClient, data: bytes = b"", **fields: Any) -> TestResponse:
    form: dict[str, Any] = {"purpose": "batch", **fields}
    if data is not None:
        form.setdefault("file", (io.BytesIO(data), "in.jsonl"))
    form = {k: v for k, v in form.items() if v is not None}
    return client.post("/v1/files", data=form, headers=AUTH, content_type="multipart/form-data")


GOOD = jsonl([request_line("a", "x")])


def test_an_upload_larger_than_any_other_body_is_streamed_to_the_storage(
    client: FlaskClient, files_dir: Path
) -> None:
    data = jsonl([request_line(f"c{i}", "y" * 500) for i in range(MAX_LINES)])
    assert 1024 < len(data) <= MAX_FILE_BYTES
    r = _upload(client, data)
    assert r.status_code == 200, r.get_data(as_text=True)
    file_id = r.get_json()["id"]
    assert (files_dir / file_id).read_bytes() == data
    got = client.get(f"/v1/files/{file_id}/content", headers=AUTH)
    assert got.status_code == 200 and got.data == data
    assert got.headers["Content-Length"] == str(len(data))


@pytest.mark.parametrize(
    "fields,code,param",
    [
        ({"purpose": None}, "missing_field", "purpose"),
        ({"purpose": "fine-tune"}, "invalid_request", "purpose"),
        ({"file": None}, "missing_field", "file"),
        ({"file": "text, not a file"}, "invalid_request", "file"),
        ({"colour": "blue"}, "invalid_request", "colour"),
        (
            {"expires_after[anchor]": "now", "expires_after[seconds]": "3600"},
            "invalid_request",
            "expires_after.anchor",
        ),
        (
            {"expires_after[anchor]": "created_at", "expires_after[seconds]": "60"},
            "invalid_request",
            "expires_after.seconds",
        ),
        ({"expires_after[seconds]": "soon"}, "invalid_request", "expires_after.seconds"),
    ],
)
def test_a_bad_upload_form_is_400_naming_the_field(
    client: FlaskClient, fields: dict[str, Any], code: str, param: str
) -> None:
    _error(_upload(client, GOOD, **fields), 400, code, param)


def test_an_upload_that_is_not_multipart_is_400(client: FlaskClient) -> None:
    r = client.post("/v1/files", data=GOOD, headers=AUTH, content_type="application/jsonl")
    _error(r, 400, "invalid_request")
    r = client.post(
        "/v1/files",
        data=b"--x\r\nnonsense",
        headers=AUTH,
        content_type="multipart/form-data; boundary=x",
    )
    _error(r, 400, "invalid_request")


def test_a_file_over_the_limits_is_refused_and_nothing_of_it_is_kept(
    client: FlaskClient, files_dir: Path
) -> None:
    def kept() -> set[str]:  # files only: the folder for uploads in progress may be new
        return {p.name for p in files_dir.rglob("*") if p.is_file()}

    before = kept()
    _error(_upload(client, jsonl([request_line("a", "x" * 5000)])), 413, "request_too_large")
    lines = jsonl([request_line(f"c{i}", "z") for i in range(MAX_LINES + 1)])
    _error(_upload(client, lines), 400, "invalid_request", "file")
    assert kept() == before


@pytest.mark.parametrize(
    "fields,expires_s",
    [
        ({"expires_after[anchor]": "created_at", "expires_after[seconds]": "7200"}, 7200),
        ({"expires_after[seconds]": "3600"}, 3600),  # created_at is the only anchor there is
        ({"expires_after[anchor]": "created_at"}, Settings().files_ttl_s),
        ({}, Settings().files_ttl_s),
    ],
)
def test_a_file_can_say_when_it_expires(
    client: FlaskClient, fields: dict[str, str], expires_s: int
) -> None:
    r = _upload(client, GOOD, **fields)
    assert r.status_code == 200
    body = r.get_json()
    assert body["expires_at"] - body["created_at"] == expires_s


def _file_id(client: FlaskClient) -> str:
    return str(_upload(client, GOOD).get_json()["id"])


@pytest.mark.parametrize(
    "change,code,param",
    [
        ({"input_file_id": None}, "missing_field", "input_file_id"),
        ({"input_file_id": 7}, "invalid_request", "input_file_id"),
        ({"endpoint": "/v1/embeddings"}, "invalid_request", "endpoint"),
        ({"endpoint": None}, "missing_field", "endpoint"),
        ({"completion_window": "48h"}, "invalid_request", "completion_window"),
        ({"metadata": {"k": 1}}, "invalid_request", "metadata"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "invalid_request", "metadata"),
        ({"metadata": "tag"}, "invalid_request", "metadata"),
        (
            {"output_expires_after": {"anchor": "created_at", "seconds": 10}},
            "invalid_request",
            "output_expires_after.seconds",
        ),
        (
            {"output_expires_after": {"anchor": "created_at", "seconds": 3600, "x": 1}},
            "invalid_request",
            "output_expires_after.x",
        ),
        ({"priority": "high"}, "invalid_request", "priority"),
        ({"input_file_id": "file-" + "n" * 30}, "file_not_found", "input_file_id"),
        ({"input_file_id": "../etc/passwd"}, "file_not_found", "input_file_id"),
    ],
)
def test_a_bad_batch_request_is_400_or_404_naming_the_field(
    client: FlaskClient, change: dict[str, Any], code: str, param: str
) -> None:
    body = {
        "input_file_id": _file_id(client),
        "endpoint": CHAT,
        "completion_window": "24h",
        **change,
    }
    body = {k: v for k, v in body.items() if v is not None}
    r = client.post("/v1/batches", json=body, headers=AUTH)
    _error(r, 404 if code == "file_not_found" else 400, code, param)


@pytest.mark.parametrize(
    "method,path,query,status,code,param",
    [
        ("get", "/v1/batches", {"limit": "0"}, 400, "invalid_request", "limit"),
        ("get", "/v1/batches", {"limit": "101"}, 400, "invalid_request", "limit"),
        ("get", "/v1/files", {"limit": "x"}, 400, "invalid_request", "limit"),
        ("get", "/v1/files", {"order": "up"}, 400, "invalid_request", "order"),
        ("get", "/v1/batches/batch_" + "a" * 32, {"wait": "soon"}, 400, "invalid_wait", "wait"),
        ("get", "/v1/batches/batch_" + "a" * 32, {}, 404, "batch_not_found", "id"),
        ("get", "/v1/batches/nope", {}, 404, "batch_not_found", "id"),
        ("post", "/v1/batches/batch_" + "a" * 32 + "/cancel", {}, 404, "batch_not_found", "id"),
        ("get", "/v1/files/file-" + "a" * 32, {}, 404, "file_not_found", "id"),
        ("get", "/v1/files/../../etc/content", {}, 404, "not_found", None),
        ("delete", "/v1/files/file-" + "a" * 32, {}, 404, "file_not_found", "id"),
    ],
)
def test_bad_reads_get_openai_errors(
    client: FlaskClient,
    method: str,
    path: str,
    query: dict[str, str],
    status: int,
    code: str,
    param: str | None,
) -> None:
    r = getattr(client, method)(path, query_string=query, headers=AUTH)
    _error(r, status, code, param)


@pytest.mark.parametrize(
    "method,path",
    [
        ("post", "/v1/files"),
        ("get", "/v1/files"),
        ("get", "/v1/files/file-" + "a" * 32),
        ("get", "/v1/files/file-" + "a" * 32 + "/content"),
        ("delete", "/v1/files/file-" + "a" * 32),
        ("post", "/v1/batches"),
        ("get", "/v1/batches"),
        ("get", "/v1/batches/batch_" + "a" * 32),
        ("post", "/v1/batches/batch_" + "a" * 32 + "/cancel"),
    ],
)
def test_no_key_is_401(client: FlaskClient, method: str, path: str) -> None:
    _error(getattr(client, method)(path, data=b"x"), 401, "invalid_api_key", None)


def test_batches_list_newest_first_a_page_at_a_time(client: FlaskClient) -> None:
    file_id = _file_id(client)
    made = [
        client.post(
            "/v1/batches",
            headers=AUTH,
            json={
                "input_file_id": file_id,
                "endpoint": CHAT,
                "completion_window": "24h",
                "metadata": {"n": str(i)},
            },
        ).get_json()["id"]
        for i in range(5)
    ]
    seen: list[str] = []
    after = ""
    while True:
        page = client.get(
            "/v1/batches", query_string={"limit": 2, "after": after}, headers=AUTH
        ).get_json()
        seen += [b["id"] for b in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert [i for i in seen if i in made] == made[::-1]
    # No worker runs here: a cancel stops the batch before it was ever validated.
    r = client.post(f"/v1/batches/{made[0]}/cancel", headers=AUTH)
    assert r.status_code == 200 and r.get_json()["status"] == "cancelling"
    deleted = client.delete(f"/v1/files/{file_id}", headers=AUTH)
    _error(deleted, 409, "file_in_use", "id")


def test_a_key_s_unfinished_batches_are_capped_even_when_created_at_once(
    tmp_path: Path,
) -> None:
    """12 creates at once against a cap of 3: exactly 3 made, 9 get 429 naming the limit;
    a batch that ends (or whose record is lost) makes room for one more."""
    server = LocalRedis().start()
    settings = Settings(
        redis_url=server.url,
        api_keys=(("alice", KEY),),
        default_model="fake",
        files_dir=str(tmp_path),
        batch_max_active_per_key=3,
    )
    try:
        with in_process(settings) as app:
            clients = [app.test_client() for _ in range(12)]
            file_id = _file_id(clients[0])
            body = {"input_file_id": file_id, "endpoint": CHAT, "completion_window": "24h"}
            start = threading.Barrier(len(clients))

            def create(client: FlaskClient) -> TestResponse:
                start.wait()
                return client.post("/v1/batches", json=body, headers=AUTH)

            with ThreadPoolExecutor(len(clients)) as pool:
                answers = list(pool.map(create, clients))
            made = [r.get_json()["id"] for r in answers if r.status_code == 200]
            assert len(made) == 3, [r.status_code for r in answers]
            refused = [r for r in answers if r.status_code != 200]
            for r in refused:
                error = _error(r, 429, "active_batch_limit_exceeded", None)
                assert "CHATQ_BATCH_MAX_ACTIVE_PER_KEY" in error["message"], error
            again = clients[0].post("/v1/batches", json=body, headers=AUTH)
            _error(again, 429, "active_batch_limit_exceeded", None)
            store = BatchStore(app.extensions["chatq"].store.redis, 3600)
            assert store.lease(made[0], "w", 10.0)
            assert store.finish(made[0], "w", "cancelled", []) == "cancelled"
            assert clients[0].post("/v1/batches", json=body, headers=AUTH).status_code == 200
            _error(
                clients[0].post("/v1/batches", json=body, headers=AUTH),
                429,
                "active_batch_limit_exceeded",
                None,
            )
            # A batch whose record went with Redis's data leaves the loop's set alone.
            store.redis.srem(keys.batches_active(), made[1])
            assert clients[0].post("/v1/batches", json=body, headers=AUTH).status_code == 200
    finally:
        server.stop()
