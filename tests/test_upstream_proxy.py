"""The worker's upstream call goes through the proxy that the environment names (`HTTP_PROXY`),
and around it for a host in `NO_PROXY` (in process: the worker's own pools and attempt).

The upstream's host does not resolve: only a call sent through the proxy can succeed. The
proxy is the tests' shapes upstream, which answers any request line, absolute ones too."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from chatq.config import Settings
from chatq.logs import Redactor
from chatq.store import Store
from scripts.localredis import free_port
from tests.shapes_upstream import ShapesUpstream
from worker.attempts import Attempt
from worker.flusher import DeltaWriter
from worker.running import Handle
from worker.upstream import Timeouts, attempt, make_pools

UPSTREAM = "http://upstream.invalid/v1"  # .invalid never resolves (RFC 2606)


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ShapesUpstream]:
    """A proxy named by HTTP_PROXY, with NO_PROXY cleared."""
    server = ShapesUpstream()
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url.removesuffix("/v1"))
    try:
        yield server
    finally:
        server.stop()


def _call() -> Attempt:
    handle = Handle("job_proxy", "run", time.monotonic() + 10)
    # The text stays in the writer's buffer (it flushes at 10,000 characters): no Redis needed.
    writer = DeltaWriter(Store(redis.Redis(port=free_port()), 60), handle, 10_000)
    pools = make_pools(Settings(upstream_urls=(UPSTREAM,), worker_concurrency=2))
    body = {"model": "shape:ok"}
    timeouts = Timeouts(2, 5, 5)
    return attempt(
        pools, UPSTREAM + "/chat/completions", body, {}, timeouts, handle, writer, Redactor()
    )


def test_the_call_goes_through_the_proxy_of_the_environment(proxy: ShapesUpstream) -> None:
    result = _call()
    assert (result.ok, result.status) == (True, 200)
    assert result.completion["choices"][0]["message"]["content"] == "fine"
    assert proxy.calls_to("ok") == 1


def test_a_host_in_no_proxy_is_called_directly(
    proxy: ShapesUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "upstream.invalid")
    result = _call()
    # Straight to a host that does not resolve: a connection error, retried, not a timeout.
    assert (result.ok, result.retryable, result.outcome) == (False, True, "connection_error")
    assert proxy.calls_to("ok") == 0
