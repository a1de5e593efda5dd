"""What the batch tests share: input files, a reader of OpenAI's batch output format, a stack
of its own (Redis and fakellm included, so that upstream calls can be counted), waiting."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
import requests
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ConfigDict

from chatq.batches import record as batches
from chatq.batches.file_records import FileIndex, new_meta
from chatq.batches.file_storage import DirectoryStorage, new_file_id
from chatq.batches.record import BatchStore
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, start_fakellm

ENDED = {"completed", "failed", "cancelled", "expired"}
CHAT = "/v1/chat/completions"


def request_line(
    custom_id: str | None, content: str, model: str = "fake", **fields: Any
) -> dict[str, Any]:
    """One input line, as OpenAI's docs show it; `fields` override its keys."""
    line: dict[str, Any] = {
        "custom_id": custom_id,
        "method": "POST",
        "url": CHAT,
        "body": {"model": model, "messages": [{"role": "user", "content": content}]},
    }
    if custom_id is None:
        del line["custom_id"]
    return {**line, **fields}


def stored_batch(
    client: redis.Redis, files_dir: str, lines: list[dict[str, Any] | str], owner: str = "alice"
) -> str:
    """A batch of `owner`'s on these lines, made as POST /v1/batches makes it (its input file
    in `files_dir` and the file's record beside it, no web); its id."""
    file_id = new_file_id()
    upload = DirectoryStorage(files_dir).create(file_id)
    upload.write(jsonl(lines))
    size = upload.commit()
    now = time.time()
    meta = new_meta(
        file_id=file_id,
        owner=owner,
        size_bytes=size,
        lines=len(lines),
        filename="in.jsonl",
        purpose="batch",
        created_at=now,
        expires_at=now + 3600,
    )
    FileIndex(client).add(meta)
    record = batches.new_record(
        batch_id=batches.new_batch_id(),
        owner=owner,
        endpoint=CHAT,
        input_file_id=file_id,
        metadata=None,
        output_expires_s=3600,
    )
    assert BatchStore(client, 3600).create(record, 3600.0, max_active=100) == "created"
    return record["id"]


def jsonl(lines: list[dict[str, Any] | str]) -> bytes:
    """A JSONL file of these lines (a str is written as it is)."""
    return "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines).encode()


# --- OpenAI's batch output format ----------------------------------------------------------


class Strict(BaseModel):
    """No key beyond those OpenAI documents."""

    model_config = ConfigDict(extra="forbid")


class LineResponse(Strict):
    """`response` of an output line."""

    status_code: int
    request_id: str
    body: dict[str, Any]


class LineError(Strict):
    """`error` of an error line."""

    code: str
    message: str


class OutputLine(Strict):
    """One line of a batch's output or error file."""

    id: str
    custom_id: str | None
    response: LineResponse | None
    error: LineError | None

    def completion(self) -> ChatCompletion:
        """The chat.completion of a successful line, parsed by the SDK's own model."""
        assert self.response is not None and self.response.status_code == 200, self
        return ChatCompletion.model_validate(self.response.body)


def parse_output(text: str) -> list[OutputLine]:
    """Every line of an output or error file."""
    return [OutputLine.model_validate_json(line) for line in text.splitlines() if line]


def without_nulls(value: Any) -> Any:
    """`value` less the null fields of its objects: OpenAI's API sends null for a batch's
    unset times and files, but its published schema does not mark them nullable."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


# --- talking to a stack -------------------------------------------------------------------


def session(key: str = ALICE_KEY) -> requests.Session:
    """An HTTP session sending `key`."""
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    return s


def upload(url: str, data: bytes, key: str = ALICE_KEY, **fields: str) -> requests.Response:
    """POST /v1/files with `data` as the file and purpose batch (unless `fields` say)."""
    form = {"purpose": "batch", **fields}
    return session(key).post(
        f"{url}/v1/files", files={"file": ("input.jsonl", data)}, data=form, timeout=60
    )


def create_batch(url: str, file_id: str, key: str = ALICE_KEY, **fields: Any) -> requests.Response:
    """POST /v1/batches on `file_id` for /v1/chat/completions in 24h; `fields` override."""
    body = {"input_file_id": file_id, "endpoint": CHAT, "completion_window": "24h", **fields}
    return session(key).post(f"{url}/v1/batches", json=body, timeout=30)


def run_batch(
    url: str, lines: list[dict[str, Any] | str], key: str = ALICE_KEY, **fields: Any
) -> dict[str, Any]:
    """Upload the lines, create a batch on them; the batch object as created."""
    uploaded = upload(url, jsonl(lines), key)
    assert uploaded.status_code == 200, uploaded.text
    created = create_batch(url, uploaded.json()["id"], key, **fields)
    assert created.status_code == 200, created.text
    return dict(created.json())


def get_batch(url: str, batch_id: str, wait_s: float = 0, key: str = ALICE_KEY) -> dict[str, Any]:
    """GET /v1/batches/{id}, long-polled `wait_s`."""
    r = session(key).get(f"{url}/v1/batches/{batch_id}", params={"wait": wait_s}, timeout=70)
    assert r.status_code == 200, r.text
    return dict(r.json())


def wait_ended(
    url: str, batch_id: str, timeout_s: float = 60, key: str = ALICE_KEY
) -> dict[str, Any]:
    """The batch once it has ended (long-polls; fails after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        wait_s = min(20, max(0.1, deadline - time.monotonic()))
        batch = get_batch(url, batch_id, wait_s, key)
        if batch["status"] in ENDED:
            return batch
        assert time.monotonic() < deadline, f"batch not ended: {batch}"


def wait_for(url: str, batch_id: str, check: Any, timeout_s: float = 60) -> dict[str, Any]:
    """The batch once `check(batch)` holds (polls)."""
    deadline = time.monotonic() + timeout_s
    while True:
        batch = get_batch(url, batch_id)
        if check(batch):
            return batch
        assert time.monotonic() < deadline, f"batch never got there: {batch}"
        time.sleep(0.1)


def content(url: str, file_id: str | None, key: str = ALICE_KEY) -> list[OutputLine]:
    """The lines of an output or error file (none when there is no file)."""
    if file_id is None:
        return []
    r = session(key).get(f"{url}/v1/files/{file_id}/content", timeout=30)
    assert r.status_code == 200, r.text
    return parse_output(r.text)


def upstream_calls(upstream: str) -> int:
    """Requests the fakellm at `upstream` (…/v1) has received."""
    stats = requests.get(upstream.removesuffix("/v1") + "/stats", timeout=5).json()
    return int(stats["requests"])


@contextmanager
def own_stack(workers: int = 1, **env: str) -> Iterator[tuple[Stack, str]]:
    """A chatq stack on a Redis and a fakellm of its own; yields (stack, fakellm URL)."""
    server = LocalRedis().start()
    fake, fake_url = start_fakellm()
    stack = start_stack(server.url, fake_url, workers=workers, **env)
    try:
        yield stack, fake_url
    finally:
        stack.stop()
        fake.stop()
        server.stop()
