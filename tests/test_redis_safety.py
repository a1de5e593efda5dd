"""Redis settings that lose jobs (eviction, no persistence) are loud, in the logs and /readyz."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import requests
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from scripts.localredis import LocalRedis, free_port
from tests.conftest import start_stack
from tests.procs import Proc, base_env, start_web

WARNING = "REDIS MAY LOSE JOBS"
REFUSAL = "refusing to start (CHATQ_REDIS_REQUIRE_SAFE=1)"


def _readiness(url: str) -> requests.Response:
    return requests.get(f"{url}/readyz", timeout=10)


def assert_readiness_schema(body: dict[str, Any]) -> None:
    """The body is the `Readiness` object of /openapi.json."""
    from web.openapi.document import document

    resource = Resource.from_contents(document(), default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:doc", resource)
    schema = {"$ref": "urn:doc#/components/schemas/Readiness"}
    Draft202012Validator(schema, registry=registry).validate(body)


@pytest.fixture
def unsafe_redis() -> Iterator[LocalRedis]:
    """A Redis that evicts (allkeys-lru) and persists nothing (no AOF, no RDB save points)."""
    server = LocalRedis(appendonly=False).start()
    redis.Redis.from_url(server.url).config_set("maxmemory-policy", "allkeys-lru")
    yield server
    server.stop()


@pytest.fixture
def safe_redis() -> Iterator[LocalRedis]:
    """noeviction and AOF on."""
    server = LocalRedis(appendonly=True).start()
    yield server
    server.stop()


def test_an_unsafe_redis_is_one_loud_line_and_false_fields_in_readyz(
    unsafe_redis: LocalRedis, fakellm: str
) -> None:
    stack = start_stack(unsafe_redis.url, fakellm)
    try:
        ready = _readiness(stack.url)
        assert ready.status_code == 200
        assert ready.json()["redis_noeviction"] is False
        assert ready.json()["redis_persistent"] is False
        assert_readiness_schema(ready.json())
        for proc in stack.procs:  # the worker, then the web
            lines = [line for line in proc.log_text().splitlines() if WARNING in line]
            assert len(lines) == 1, (proc.name, lines)
            assert "WARNING" in lines[0]
            assert "maxmemory-policy is allkeys-lru" in lines[0]
            assert "set maxmemory-policy noeviction" in lines[0]
            assert "neither AOF nor RDB" in lines[0] and "set appendonly yes" in lines[0]
    finally:
        stack.stop()


def _set(client: redis.Redis, **settings: str) -> None:
    for name, value in settings.items():
        client.config_set(name.replace("_", "-"), value)


def test_with_require_safe_readyz_follows_what_redis_keeps(
    safe_redis: LocalRedis, fakellm: str
) -> None:
    client = redis.Redis.from_url(safe_redis.url, decode_responses=True)
    web, url = start_web(base_env(safe_redis.url, fakellm, CHATQ_REDIS_REQUIRE_SAFE="1"))
    try:
        assert WARNING not in web.log_text()
        ready = _readiness(url)
        assert ready.status_code == 200
        assert ready.json()["redis_noeviction"] is True
        assert ready.json()["redis_persistent"] is True
        _set(client, appendonly="no", save="")
        lost = _readiness(url)
        assert lost.status_code == 503
        assert lost.json()["error"]["code"] == "redis_unsafe"
        assert "neither AOF nor RDB" in lost.json()["error"]["message"]
        _set(client, save="3600 1")  # RDB snapshots count as persistence
        assert _readiness(url).json()["redis_persistent"] is True
        _set(client, maxmemory_policy="volatile-lru")
        evicting = _readiness(url)
        assert evicting.status_code == 503
        assert "maxmemory-policy is volatile-lru" in evicting.json()["error"]["message"]
        _set(client, maxmemory_policy="noeviction")
        assert _readiness(url).status_code == 200
    finally:
        web.stop()


def _exit_code(proc: Proc) -> int:
    assert proc.process is not None
    try:
        return proc.process.wait(60)
    except subprocess.TimeoutExpired:
        proc.stop()
        raise AssertionError(f"{proc.name} kept running on an unsafe Redis") from None


@pytest.mark.parametrize("name", ["web", "worker"])
def test_require_safe_makes_web_and_worker_refuse_an_unsafe_redis(
    unsafe_redis: LocalRedis, fakellm: str, name: str
) -> None:
    env = base_env(
        unsafe_redis.url,
        fakellm,
        CHATQ_REDIS_REQUIRE_SAFE="1",
        CHATQ_BIND=f"127.0.0.1:{free_port()}",
        CHATQ_WORKER_METRICS_BIND=f"127.0.0.1:{free_port()}",
    )
    proc = Proc(name, [name], env).start()
    assert _exit_code(proc) != 0
    refusals = [line for line in proc.log_text().splitlines() if REFUSAL in line]
    assert len(refusals) == 1, proc.log_text()[-2000:]
    assert "maxmemory-policy is allkeys-lru" in refusals[0]
    assert "Traceback" not in proc.log_text()


def test_a_redis_that_hides_its_config_is_reported_unknown(
    safe_redis: LocalRedis, fakellm: str
) -> None:
    """Managed Redis often forbids CONFIG: INFO still shows the policy, RDB stays unknown."""
    admin = redis.Redis.from_url(safe_redis.url)
    admin.config_set("appendonly", "no")
    admin.acl_setuser(
        "chatq",
        enabled=True,
        passwords=["+s3cret-pass"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-config"],
    )
    url = safe_redis.url.replace("redis://", "redis://chatq:s3cret-pass@")
    web, web_url = start_web(base_env(url, fakellm))
    try:
        ready = _readiness(web_url)
        assert ready.status_code == 200
        assert ready.json()["redis_noeviction"] is True
        assert ready.json()["redis_persistent"] is None
        assert_readiness_schema(ready.json())
        lines = [line for line in web.log_text().splitlines() if WARNING in line]
        assert len(lines) == 1 and "persistence could not be read" in lines[0], lines
    finally:
        web.stop()
