"""Security: tenant isolation on every endpoint, unguessable ids, size limits, validated
`wait` and `cursor`, no SSRF, no traceback in any answer, keys held hashed. The audit of the
locked runtime dependencies needs the network: it is `make audit`, not a test."""

from __future__ import annotations

import hmac
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from chatq import keys
from chatq.jobs import record as jobs
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import ALICE_KEY, BOB_KEY, UPSTREAM_KEY, wait_until
from web.http.auth import KeyRing

URL_SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
TRACE_MARKERS = ("Traceback", 'File "', ".py", "line ", "Error:")


def _body(content: str, model: str = "fake", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def _headers(key: str = ALICE_KEY, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", **extra}


def _assert_openai_error(r: requests.Response, status: int, code: str) -> None:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    error = r.json()["error"]
    assert error["code"] == code, error
    assert set(error) == {"message", "type", "param", "code"}


# --- a recording upstream --------------------------------------------------------------


class RecordingUpstream:
    """An HTTP server in this process that records every request it gets and passes it on
    to fakellm (or answers 502 with `forward_to=""`): what the workers really send."""

    def __init__(self, forward_to: str = "") -> None:
        self.forward_to = forward_to.removesuffix("/v1")
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                recorder.connections += 1
                super().setup()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers.items()),
                        "body": body,
                    }
                )
                status, content_type, data = recorder.forward(
                    self.command, self.path, dict(self.headers.items()), body
                )
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        if not self.forward_to:
            return 502, "application/json", b'{"error": {"message": "not an upstream"}}'
        sent = {
            k: v
            for k, v in headers.items()
            if k.lower() in ("authorization", "content-type", "accept")
        }
        r = requests.request(method, self.forward_to + path, headers=sent, data=body, timeout=30)
        return r.status_code, r.headers.get("Content-Type", "application/json"), r.content

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class EchoingUpstream(RecordingUpstream):
    """An upstream that refuses every call with an error quoting the key and headers it got,
    as some APIs quote a wrong key back: status from the model name, `echo:401`."""

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        model = json.loads(body or b"{}").get("model", "echo:401")
        status = int(model.partition(":")[2] or 401)
        message = (
            f"Incorrect API key provided: {headers.get('Authorization')}. "
            f"Your request had headers {json.dumps(headers)}"
        )
        error = {"error": {"message": message, "type": "invalid_request_error", "code": "x"}}
        return status, "application/json", json.dumps(error).encode()


@pytest.fixture(scope="module")
def recorder(fakellm: str) -> Iterator[RecordingUpstream]:
    rec = RecordingUpstream(fakellm)
    yield rec
    rec.stop()


@pytest.fixture(scope="module")
def bait() -> Iterator[RecordingUpstream]:
    """A server a client would like the workers to call instead: it must hear nothing."""
    rec = RecordingUpstream()
    yield rec
    rec.stop()


@pytest.fixture(scope="module")
def recorded(redis_url: str, recorder: RecordingUpstream) -> Iterator[Stack]:
    """A stack whose upstream is the recorder, with the result cache shared on purpose."""
    s = start_stack(
        redis_url.rsplit("/", 1)[0] + "/15", recorder.url + "/v1", CHATQ_CACHE_SHARED="1"
    )
    s.redis.flushdb()
    yield s
    s.stop()


# --- tenant isolation ------------------------------------------------------------------


def _as_seen_by(stack: Stack, job_id: str, key: str) -> dict[str, tuple[int, Any]]:
    """What every per-job endpoint answers `key` for `job_id`: (status, body)."""
    h = _headers(key)
    base = f"{stack.url}/v1/jobs/{job_id}"
    calls = {
        "job": lambda: requests.get(base, headers=h, params={"wait": 10}, timeout=20),
        "result": lambda: requests.get(
            base + "/result", headers=h, params={"wait": 10}, timeout=20
        ),
        "events": lambda: requests.get(
            base + "/events", headers=h, params={"wait": 10}, timeout=20
        ),
        "sse": lambda: requests.get(
            base + "/events", timeout=20, headers={**h, "Accept": "text/event-stream"}
        ),
        "cancel": lambda: requests.post(base + "/cancel", headers=h, timeout=20),
    }
    seen = {}
    for name, call in calls.items():
        t0 = time.monotonic()
        r = call()
        assert time.monotonic() - t0 < 5.0, f"{name}: a foreign id must not be waited on"
        seen[name] = (r.status_code, r.json() if r.status_code >= 400 else r.text[:100])
    return seen


def test_another_key_gets_404_on_every_job_endpoint_exactly_as_for_an_unknown_id(
    stack: Stack,
) -> None:
    running = stack.submit("alice's secret plan", model="fake:ttft=3,tokens=5").json()
    foreign = _as_seen_by(stack, running["id"], BOB_KEY)
    unknown = _as_seen_by(stack, jobs.new_job_id(), BOB_KEY)
    assert foreign == unknown
    assert {status for status, _ in foreign.values()} == {404}
    assert {body["error"]["code"] for _, body in foreign.values()} == {"job_not_found"}
    # Bob's cancel did nothing; alice still sees and owns her job.
    mine = stack.get(running["id"], wait=10).json()
    assert mine["status"] == "completed" and mine["output_text"]
    assert "alice's secret plan" not in json.dumps(foreign)


def test_idempotency_keys_are_per_owner(stack: Stack) -> None:
    def post(owner_key: str, idem: str, body: dict[str, Any]) -> requests.Response:
        return requests.post(
            f"{stack.url}/v1/jobs",
            json=body,
            timeout=20,
            headers=_headers(owner_key, **{"Idempotency-Key": idem}),
        )

    key, other_key = f"idem-{time.time_ns()}", f"idem-other-{time.time_ns()}"
    body = _body("same body")
    alice_1 = post(ALICE_KEY, key, body).json()
    bob_1 = post(BOB_KEY, key, body).json()
    alice_2 = post(ALICE_KEY, key, body).json()
    assert alice_1["id"] == alice_2["id"] != bob_1["id"]
    assert stack.redis.hget(keys.job(bob_1["id"]), "owner") == "bob"
    assert stack.get(alice_1["id"], key=BOB_KEY).status_code == 404
    # Alice's use of a key is invisible to bob: his different body is no 422 for him.
    assert post(ALICE_KEY, other_key, _body("alice's body")).status_code == 202
    bob_2 = post(BOB_KEY, other_key, _body("bob's body"))
    assert bob_2.status_code == 202, bob_2.text
    assert post(BOB_KEY, other_key, _body("bob's second body")).status_code == 422


def test_the_result_cache_and_single_flight_are_per_owner(stack: Stack) -> None:
    body = _body(f"deterministic {time.time_ns()}", "fake:ttft=1,tokens=8", temperature=0)
    url = f"{stack.url}/v1/jobs"
    with ThreadPoolExecutor(2) as pool:
        answers = list(
            pool.map(
                lambda k: requests.post(
                    url, json=body, headers=_headers(k), params={"wait": 20}, timeout=30
                ).json(),
                [ALICE_KEY, BOB_KEY],
            )
        )
    assert [a["status"] for a in answers] == ["completed", "completed"]
    # Neither was served from the other's cache, nor followed the other's upstream call.
    assert [a["cached"] for a in answers] == [False, False]
    assert [a["attempts"] for a in answers] == [1, 1]
    for a in answers:
        assert not stack.redis.hget(keys.job(a["id"]), "leader")
    # Each owner's identical request now hits the cache: their own copy.
    for a, k in zip(answers, (ALICE_KEY, BOB_KEY), strict=True):
        again = requests.post(url, json=body, headers=_headers(k), timeout=30).json()
        assert again["cached"] is True and again["output_text"] == a["output_text"]


def test_a_shared_cache_serves_another_owner_only_when_configured(recorded: Stack) -> None:
    body = _body(f"shared {time.time_ns()}", temperature=0)
    url = f"{recorded.url}/v1/jobs"
    first = requests.post(
        url, json=body, headers=_headers(ALICE_KEY), params={"wait": 20}, timeout=30
    ).json()
    second = requests.post(url, json=body, headers=_headers(BOB_KEY), timeout=30).json()
    assert first["cached"] is False and second["cached"] is True
    assert second["id"] != first["id"]
    assert recorded.get(first["id"], key=BOB_KEY).status_code == 404


# --- job ids ---------------------------------------------------------------------------


def _chi_square(counts: Counter[str], alphabet: set[str]) -> float:
    n = sum(counts.values())
    expected = n / len(alphabet)
    return sum((counts.get(c, 0) - expected) ** 2 / expected for c in alphabet)


def test_job_ids_carry_at_least_122_random_bits(stack: Stack) -> None:
    made = [jobs.new_job_id() for _ in range(20_000)]
    with ThreadPoolExecutor(8) as pool:
        served = list(pool.map(lambda i: stack.submit(f"id {i}").json()["id"], range(40)))
    assert len(set(made + served)) == len(made) + len(served)
    lengths = {len(i) for i in made + served}
    assert len(lengths) == 1 and all(i.startswith("job_") for i in made + served)
    suffixes = [i.removeprefix("job_") for i in made]
    seen = set("".join(suffixes + [i.removeprefix("job_") for i in served]))
    assert seen <= URL_SAFE
    assert len(seen) == 64  # every symbol of the alphabet turns up
    width = lengths.pop() - len("job_")
    assert width * math.log2(len(seen)) >= 122
    # Every position is uniform over the 64 symbols (63 degrees of freedom; 200 is far out
    # in the tail, p < 1e-15), so the bits counted above are all random.
    for position in range(width):
        chi2 = _chi_square(Counter(s[position] for s in suffixes), URL_SAFE)
        assert chi2 < 200, (position, chi2)


# --- request size limits ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/chat/completions"])
def test_a_body_over_the_limit_is_413(stack: Stack, path: str) -> None:
    big = json.dumps(_body("w " * (1024 * 1024 // 2 + 10))).encode()
    r = requests.post(stack.url + path, data=big, headers=_headers(), timeout=30)
    _assert_openai_error(r, 413, "request_too_large")


def _chunks(data: bytes, size: int = 65536) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/chat/completions"])
def test_a_chunked_body_over_the_limit_is_413_too(stack: Stack, path: str) -> None:
    big = json.dumps(_body("w " * (1024 * 1024 // 2 + 10))).encode()
    r = requests.post(stack.url + path, data=_chunks(big), headers=_headers(), timeout=30)
    _assert_openai_error(r, 413, "request_too_large")


def test_a_chunked_body_under_the_limit_is_accepted(stack: Stack) -> None:
    small = json.dumps(_body("chunked but small")).encode()
    r = requests.post(
        f"{stack.url}/v1/jobs", data=_chunks(small, 7), headers=_headers(), timeout=30
    )
    assert r.status_code == 202, r.text


OVERSIZE_HEADERS = {
    "one huge header (gunicorn limit_request_field_size 8190)": {"X-Big": "S3CRET" * 2000},
    "too many headers (gunicorn limit_request_fields 100)": {
        f"X-Many-{i}": "S3CRET" for i in range(120)
    },
    "a huge bearer token": {"Authorization": "Bearer " + ALICE_KEY + "S3CRET" * 2000},
}


@pytest.mark.parametrize("extra", OVERSIZE_HEADERS.values(), ids=list(OVERSIZE_HEADERS))
def test_oversize_headers_are_refused_without_echo_and_the_web_survives(
    stack: Stack, extra: dict[str, str]
) -> None:
    r = requests.get(f"{stack.url}/v1/queue", headers={**_headers(), **extra}, timeout=10)
    # gunicorn refuses them before the app: 431 (or 400), never served, never echoed.
    assert r.status_code in (400, 431), r.status_code
    assert "S3CRET" not in r.text and ALICE_KEY not in r.text
    assert requests.get(f"{stack.url}/v1/queue", headers=_headers(), timeout=10).ok


def test_an_oversize_request_line_is_refused_and_the_web_survives(stack: Stack) -> None:
    r = requests.get(
        f"{stack.url}/v1/jobs/job_x", params={"q": "S3CRET" * 1000}, headers=_headers(), timeout=10
    )
    _assert_openai_error(r, 414, "request_line_too_long")
    assert "S3CRET" not in r.text
    assert requests.get(f"{stack.url}/healthz", timeout=10).ok


def test_the_http_servers_own_refusals_are_in_the_document_of_every_operation(
    stack: Stack,
) -> None:
    paths = requests.get(f"{stack.url}/openapi.json", timeout=10).json()["paths"]
    operations = [
        op for path, ops in paths.items() if path.startswith("/v1/") for op in ops.values()
    ]
    assert operations
    for op in operations:
        assert {"414", "431"} <= set(op["responses"]), op["operationId"]


def test_oversize_headers_are_refused_in_openai_shape(stack: Stack) -> None:
    r = requests.get(
        f"{stack.url}/v1/queue", headers={**_headers(), "X-Big": "a" * 9000}, timeout=10
    )
    _assert_openai_error(r, 431, "request_header_fields_too_large")


# --- wait and cursor -------------------------------------------------------------------

BAD_WAITS = [
    "-1",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "1e",
    "e5",
    "abc",
    "",
    " ",
    "0x10",
    "1,5",
    "--1",
    "5s",
    "1.2.3",
]


@pytest.fixture(scope="module")
def done_job(stack: Stack) -> dict[str, Any]:
    job: dict[str, Any] = stack.submit("done", wait=10).json()
    assert job["status"] == "completed"
    return job


@pytest.mark.parametrize("suffix", ["", "/result", "/events"])
def test_bad_wait_values_are_400_on_every_waiting_endpoint(
    stack: Stack, done_job: dict[str, Any], suffix: str
) -> None:
    for value in BAD_WAITS:
        r = stack.get(done_job["id"], suffix=suffix, wait=value)
        _assert_openai_error(r, 400, "invalid_wait")
    r = requests.post(
        f"{stack.url}/v1/jobs",
        json=_body("x"),
        params={"wait": "nan"},
        headers=_headers(),
        timeout=10,
    )
    _assert_openai_error(r, 400, "invalid_wait")


def test_huge_waits_are_capped_and_unreadable_prefer_waits_ignored(
    stack: Stack, done_job: dict[str, Any]
) -> None:
    r = stack.get(done_job["id"], wait="9" * 300)
    assert r.status_code == 200 and r.headers["Preference-Applied"] == "wait=55"
    for prefer in ("wait=abc", "wait=-1", "wait=nan", "wait=" + "9" * 5000):
        r = requests.get(
            f"{stack.url}/v1/jobs/{done_job['id']}", timeout=10, headers=_headers(Prefer=prefer)
        )
        assert r.status_code == 200, (prefer, r.text)


BAD_CURSORS = [
    "abc",
    "-1",
    "1-",
    "-1-1",
    "1-2-3",
    "(1-2",
    "[1-2",
    "+",
    "-",
    "0-0 ",
    "1 -1",
    "1-1\r",
    "1" * 21,
    "1-" + "1" * 21,
    "\u0660",
    "1-1;DROP",
    "*",
    "$",
]


@pytest.mark.parametrize("where", ["cursor", "Last-Event-ID"])
def test_bad_cursors_are_400(stack: Stack, done_job: dict[str, Any], where: str) -> None:
    for cursor in BAD_CURSORS:
        if where == "cursor":
            r = stack.get(done_job["id"], suffix="/events", cursor=cursor)
        elif cursor == cursor.strip() and cursor.isascii():  # as a header can carry it
            r = requests.get(
                f"{stack.url}/v1/jobs/{done_job['id']}/events",
                timeout=10,
                headers=_headers(Accept="text/event-stream", **{"Last-Event-ID": cursor}),
            )
        else:
            continue
        _assert_openai_error(r, 400, "invalid_cursor")


# Cursors that web/events.valid_cursor lets through although Redis refuses them as stream ids.
UNCHECKED_CURSORS = {
    "20 digits over 2**64-1": "99999999999999999999-0",
    "the largest id, exclusive": "18446744073709551615-18446744073709551615",
    "sequence overflow": "0-99999999999999999999",
    "trailing newline ($ matches before it)": "1-1\n",
    "a bare 0 and a newline": "0\n",
    "non-ASCII digits (\\d is Unicode)": "\u0661-\u0661",
}


def test_unchecked_cursors_are_400_not_500(stack: Stack, done_job: dict[str, Any]) -> None:
    for cursor in UNCHECKED_CURSORS.values():
        r = stack.get(done_job["id"], suffix="/events", cursor=cursor)
        _assert_openai_error(r, 400, "invalid_cursor")


def test_an_overflowing_last_event_id_is_400_not_a_broken_stream(
    stack: Stack, done_job: dict[str, Any]
) -> None:
    r = requests.get(
        f"{stack.url}/v1/jobs/{done_job['id']}/events",
        timeout=10,
        headers=_headers(
            Accept="text/event-stream",
            **{"Last-Event-ID": UNCHECKED_CURSORS["20 digits over 2**64-1"]},
        ),
    )
    _assert_openai_error(r, 400, "invalid_cursor")


# --- no traceback, ever ----------------------------------------------------------------


def _nasty_requests(stack: Stack, job_id: str) -> Iterator[requests.Response]:
    h = _headers()
    for cursor in UNCHECKED_CURSORS.values():
        yield stack.get(job_id, suffix="/events", cursor=cursor)
    deep = "[" * 100_000 + "]" * 100_000
    for raw in (
        deep,
        '{"messages": ' + deep + "}",
        "\xff\xfe",
        '{"messages": "\\ud800"}',
        '{"messages": [{"role": "user", "content": "\\ud800"}]}',
        "1e999999",
        "NaN",
        '{"messages": [{"role": "user", "content": [1, {"type": 5}]}]}',
        '{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}',
    ):
        yield requests.post(
            f"{stack.url}/v1/jobs", data=raw.encode("utf-8", "surrogatepass"), headers=h, timeout=20
        )
        yield requests.post(
            f"{stack.url}/v1/chat/completions",
            data=raw.encode("utf-8", "surrogatepass"),
            headers={**h, "Prefer": "wait=0"},
            timeout=20,
        )


def test_no_answer_carries_a_traceback_and_a_500_is_openai_shaped(
    stack: Stack, done_job: dict[str, Any]
) -> None:
    for r in _nasty_requests(stack, done_job["id"]):
        assert r.status_code < 600
        for marker in TRACE_MARKERS:
            assert marker not in r.text, (r.request.url, r.status_code, r.text[:300])
        if r.status_code >= 500:
            body = r.json()
            assert set(body["error"]) == {"message", "type", "param", "code"}
            assert body["error"]["type"] == "server_error"


# --- no SSRF -----------------------------------------------------------------------------

SSRF_FIELDS = (
    "base_url",
    "api_base",
    "baseURL",
    "url",
    "endpoint",
    "upstream",
    "host",
    "extra_headers",
    "headers",
    "extra_query",
    "api_key",
    "organization",
)
SSRF_HEADERS = (
    "Host",
    "X-Forwarded-Host",
    "X-Forwarded-Proto",
    "X-Forwarded-Port",
    "X-Forwarded-For",
    "Forwarded",
    "X-Original-URL",
    "X-Rewrite-URL",
    "X-Upstream",
    "X-Real-IP",
    "OpenAI-Organization",
    "X-Api-Base",
)


def _ssrf_bait(bait: RecordingUpstream) -> tuple[dict[str, Any], dict[str, str]]:
    host = bait.url.removeprefix("http://")
    fields: dict[str, Any] = {name: bait.url + "/v1" for name in SSRF_FIELDS}
    fields["extra_headers"] = {"Host": host, "Authorization": "Bearer stolen"}
    fields["headers"] = {"X-Forwarded-Host": host}
    fields["extra_query"] = {"url": bait.url}
    headers = {name: host for name in SSRF_HEADERS}
    headers["Forwarded"] = f"host={host};proto=http"
    headers["X-Original-URL"] = headers["X-Rewrite-URL"] = bait.url + "/v1/chat/completions"
    return fields, headers


def _assert_only_the_configured_upstream_was_called(
    recorder: RecordingUpstream,
    bait: RecordingUpstream,
    calls: list[dict[str, Any]],
    path: str,
) -> None:
    assert bait.connections == 0 and bait.requests == []
    assert calls, "the configured upstream was not called"
    upstream_host = recorder.url.removeprefix("http://")
    for call in calls:
        headers = {k.lower(): v for k, v in call["headers"].items()}
        assert call["path"] == path
        assert headers["host"] == upstream_host
        assert headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
        assert not {h.lower() for h in SSRF_HEADERS} - {"host"} & set(headers), headers
        assert ALICE_KEY not in json.dumps(headers) + call["body"].decode(errors="replace")


def test_no_request_field_or_header_redirects_the_upstream_call(
    recorded: Stack, recorder: RecordingUpstream, bait: RecordingUpstream
) -> None:
    fields, headers = _ssrf_bait(bait)
    marker = f"ssrf {time.time_ns()}"
    r = requests.post(
        f"{recorded.url}/v1/jobs",
        json=_body(marker, **fields),
        params={"wait": 20},
        headers=_headers(**headers),
        timeout=30,
    )
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    assert r.headers.get("Location") is None  # terminal: no Location to poison
    calls = [c for c in recorder.requests if marker.encode() in c["body"]]
    assert len(calls) == 1
    _assert_only_the_configured_upstream_was_called(recorder, bait, calls, "/v1/chat/completions")
    # The extra fields travel to the configured upstream as data in the body, nothing more.
    assert json.loads(calls[0]["body"])["base_url"] == bait.url + "/v1"
    pending = requests.post(
        f"{recorded.url}/v1/jobs",
        json=_body(marker + " 2", "fake:ttft=1"),
        headers=_headers(**headers),
        timeout=30,
    )
    assert pending.headers["Location"] == f"/v1/jobs/{pending.json()['id']}"


def test_the_front_door_and_models_list_ignore_client_upstream_hints(
    recorded: Stack, recorder: RecordingUpstream, bait: RecordingUpstream
) -> None:
    fields, headers = _ssrf_bait(bait)
    marker = f"front door {time.time_ns()}"
    r = requests.post(
        f"{recorded.url}/v1/chat/completions",
        json=_body(marker, **fields),
        headers=_headers(**headers),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    calls = [c for c in recorder.requests if marker.encode() in c["body"]]
    _assert_only_the_configured_upstream_was_called(recorder, bait, calls, "/v1/chat/completions")
    before = len(recorder.requests)
    r = requests.get(
        f"{recorded.url}/v1/models",
        params={"base_url": bait.url},
        headers=_headers(**headers),
        timeout=30,
    )
    assert r.status_code == 200 and r.json()["object"] == "list"
    _assert_only_the_configured_upstream_was_called(
        recorder, bait, recorder.requests[before:], "/v1/models"
    )


@pytest.fixture
def echoing() -> Iterator[Stack]:
    """A stack on a Redis of its own whose upstream quotes our upstream key back in errors."""
    server = LocalRedis().start()
    upstream = EchoingUpstream()
    s = start_stack(
        server.url, upstream.url + "/v1", CHATQ_UPSTREAM_MAX_ATTEMPTS="2", CHATQ_RETRY_BASE="0.05"
    )
    yield s
    s.stop()
    upstream.stop()
    server.stop()


def test_an_upstream_error_quoting_our_key_never_reaches_the_client(echoing: Stack) -> None:
    seen = []
    for model in ("echo:401", "echo:400", "echo:404", "echo:429", "echo:503"):
        job = echoing.submit("x", model=model, wait=20).json()
        assert job["status"] == "failed", job
        seen += [
            json.dumps(job),
            echoing.get(job["id"], suffix="/result").text,
            echoing.get(job["id"], suffix="/events").text,
        ]
        front = requests.post(
            f"{echoing.url}/v1/chat/completions",
            json=_body("y", model),
            headers=_headers(),
            timeout=30,
        )
        assert front.status_code >= 400
        seen.append(front.text)
    models = requests.get(f"{echoing.url}/v1/models", headers=_headers(), timeout=30)
    assert models.status_code == 502
    seen.append(models.text)
    assert "Incorrect API key provided" in "".join(seen)  # the upstream's words do come through
    for text in seen:
        assert UPSTREAM_KEY not in text and ALICE_KEY not in text, text[:500]
    for proc in echoing.procs:
        log = proc.log_text()
        assert UPSTREAM_KEY not in log and ALICE_KEY not in log, proc.name


# --- keys ------------------------------------------------------------------------------


def test_keys_are_held_hashed_and_compared_against_every_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ring = KeyRing((("alice", ALICE_KEY), ("bob", BOB_KEY), ("carol", "sk-carol-000000")))
    held = repr(vars(ring))
    assert ALICE_KEY not in held and BOB_KEY not in held
    calls: list[int] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    # The time taken does not depend on where (or whether) the key matches.
    for key, owner in ((ALICE_KEY, "alice"), ("sk-nobody-00000000", None), (BOB_KEY, "bob")):
        calls.clear()
        assert ring.owner_of(key) == owner
        assert len(calls) == 3


def test_an_unknown_or_malformed_key_is_401_everywhere(stack: Stack) -> None:
    routes = [
        ("POST", "/v1/jobs"),
        ("GET", "/v1/jobs/job_" + "a" * 32),
        ("GET", "/v1/jobs/job_" + "a" * 32 + "/result"),
        ("GET", "/v1/jobs/job_" + "a" * 32 + "/events"),
        ("POST", "/v1/jobs/job_" + "a" * 32 + "/cancel"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
        ("GET", "/v1/queue"),
    ]
    auths = [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic " + ALICE_KEY,
        "Bearer " + ALICE_KEY[:-1],
        "Bearer " + ALICE_KEY + "x",
        "bearer  " + ALICE_KEY.upper(),
        "Token " + ALICE_KEY,
    ]
    for method, path in routes:
        for auth in auths:
            headers = {} if auth is None else {"Authorization": auth}
            r = requests.request(
                method, stack.url + path, json=_body("x"), headers=headers, timeout=10
            )
            _assert_openai_error(r, 401, "invalid_api_key")


def test_the_web_keeps_answering_after_all_of_this(stack: Stack) -> None:
    wait_until(lambda: requests.get(f"{stack.url}/readyz", timeout=5).ok, 10, "readyz")
    assert all(p.alive() for p in stack.procs)
