"""Small HTTP semantics: OPTIONS answers `204` with `Allow` and never HTML (also under gunicorn,
also `OPTIONS *`), and `Prefer: respond-async` is echoed as applied, not as `wait=0`."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import requests
from flask.testing import FlaskClient

from chatq.config import settings as config
from scripts.localredis import LocalRedis
from tests.conftest import Stack
from tests.inproc import in_process
from tests.procs import ALICE_KEY

ROUTES = {
    "/v1/jobs": {"OPTIONS", "POST"},
    "/v1/jobs/job_0123456789abcdef0123": {"GET", "HEAD", "OPTIONS"},
    "/v1/jobs/job_0123456789abcdef0123/cancel": {"OPTIONS", "POST"},
    "/v1/chat/completions": {"OPTIONS", "POST"},
    "/healthz": {"GET", "HEAD", "OPTIONS"},
    "/": {"GET", "HEAD", "OPTIONS"},
}


@pytest.fixture(scope="module")
def client() -> Iterator[FlaskClient]:
    server = LocalRedis().start()
    settings = config.load({"CHATQ_REDIS_URL": server.url, "CHATQ_API_KEYS": f"alice:{ALICE_KEY}"})
    with in_process(settings) as app:
        yield app.test_client()
    server.stop()


def _allow(value: str) -> set[str]:
    return {m.strip() for m in value.split(",")}


@pytest.mark.parametrize("path,methods", ROUTES.items())
def test_options_on_a_route_is_204_with_allow_and_no_body(
    client: FlaskClient, path: str, methods: set[str]
) -> None:
    r = client.options(path)
    assert r.status_code == 204 and r.data == b""
    assert "Content-Type" not in r.headers
    assert _allow(r.headers["Allow"]) == methods


def test_options_on_an_unknown_path_is_the_json_404(client: FlaskClient) -> None:
    r = client.options("/v1/nothing-here")
    assert r.status_code == 404 and r.mimetype == "application/json"
    assert r.get_json()["error"]["code"] == "not_found"


def _raw(url: str, request_line: str) -> tuple[str, dict[str, str], bytes]:
    """One request over a raw socket: (status line, headers, body)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"{request_line}\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
    return status, headers, body


def test_options_under_gunicorn_is_204_with_allow_never_html(stack: Stack) -> None:
    status, headers, body = _raw(stack.url, "OPTIONS /v1/jobs HTTP/1.1")
    assert " 204 " in status and body == b""
    assert _allow(headers["allow"]) == {"OPTIONS", "POST"}
    assert "text/html" not in headers.get("content-type", "")
    # The server as a whole (RFC 9110 `OPTIONS *`): every method it serves somewhere.
    status, headers, body = _raw(stack.url, "OPTIONS * HTTP/1.1")
    assert " 204 " in status and body == b""
    assert _allow(headers["allow"]) == {"DELETE", "GET", "HEAD", "OPTIONS", "POST"}
    status, headers, body = _raw(stack.url, "OPTIONS /no/such/path HTTP/1.1")
    assert " 404 " in status and headers["content-type"].startswith("application/json")
    assert b'"code":"not_found"' in body


def _front_door(stack: Stack, prefer: str) -> requests.Response:
    body = {"model": "fake:ttft=3", "messages": [{"role": "user", "content": "later"}]}
    return requests.post(
        f"{stack.url}/v1/chat/completions",
        json=body,
        timeout=30,
        headers={"Authorization": f"Bearer {ALICE_KEY}", "Prefer": prefer},
    )


@pytest.mark.parametrize(
    "prefer,applied",
    [
        ("respond-async", "respond-async"),
        ("respond-async, wait=0.2", "respond-async, wait=0.2"),
        ("wait=0.2", "wait=0.2"),
    ],
)
def test_prefer_on_the_front_door_is_echoed_as_applied(
    stack: Stack, prefer: str, applied: str
) -> None:
    r = _front_door(stack, prefer)
    assert r.status_code == 202, r.text
    assert r.headers["Preference-Applied"] == applied
    assert r.headers["Location"] == f"/v1/jobs/{r.json()['id']}"
