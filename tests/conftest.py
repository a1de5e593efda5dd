"""Shared fixtures: a real Redis, fakellm, and real `python -m worker` / `python -m web`."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import requests

from scripts.localredis import LocalRedis, answers
from tests.procs import (
    ALICE_KEY,
    BOB_KEY,
    LOG_DIR,
    Proc,
    base_env,
    launch_web,
    launch_worker,
    leaked_keys,
    start_fakellm,
    stop_all,
    wait_web_up,
    wait_worker_ready,
)
from tests.webhook_receiver import Receiver

LEAKS = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """CHATQ_TEST_REDIS_URL if given and answering, else a throwaway server on a free port."""
    given = os.environ.get("CHATQ_TEST_REDIS_URL", "")
    if given and answers(given):
        yield given
        return
    server = LocalRedis().start()
    yield server.url
    server.stop()


@pytest.fixture
def own_redis_url() -> Iterator[str]:
    """The URL of a throwaway Redis of this test's own: no other test's worker takes its work."""
    server = LocalRedis().start()
    yield server.url
    server.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver of this test's own (tests/webhook_receiver.py)."""
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[str]:
    """The URL of a throwaway 3-primary Redis Cluster (skipped without Redis 7)."""
    from scripts.localcluster import LocalCluster, sharded_pubsub_supported

    if not sharded_pubsub_supported():
        pytest.skip("the redis-server here has no sharded pub/sub (Redis 7 needed)")
    cluster = LocalCluster(primaries=3).start()
    yield cluster.url
    cluster.stop()


@pytest.fixture(scope="session")
def fakellm() -> Iterator[str]:
    """The base URL (…/v1) of a fakellm process."""
    proc, url = start_fakellm()
    yield url
    proc.stop()


@dataclass
class Stack:
    """A running chatq: its processes and how to talk to it."""

    url: str
    redis: redis.Redis
    env: dict[str, str]
    procs: list[Proc] = field(default_factory=list)

    def session(self, key: str = ALICE_KEY) -> requests.Session:
        """An HTTP session sending `key`."""
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {key}"
        return s

    def submit(
        self, content: str = "hello", model: str = "fake", key: str = ALICE_KEY, **params: Any
    ) -> requests.Response:
        """POST /v1/jobs with one user message."""
        body = {"model": model, "messages": [{"role": "user", "content": content}]}
        return self.session(key).post(f"{self.url}/v1/jobs", json=body, params=params, timeout=70)

    def get(
        self, job_id: str, key: str = ALICE_KEY, suffix: str = "", **params: Any
    ) -> requests.Response:
        """GET /v1/jobs/{id}{suffix}."""
        url = f"{self.url}/v1/jobs/{job_id}{suffix}"
        return self.session(key).get(url, params=params, timeout=70)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM to every process, SIGKILL to those still running `grace_s` later."""
        stop_all(self.procs, grace_s)


def start_stack(redis_url: str, fakellm: str, workers: int = 1, **env: str) -> Stack:
    """Start `workers` worker processes and one web process, all at once: a stack is up in
    the time of its slowest process, not in the sum of theirs."""
    full_env = base_env(redis_url, fakellm, **env)
    procs = [launch_worker(full_env) for _ in range(workers)]
    web, url = launch_web(full_env)
    try:
        for proc in procs:
            wait_worker_ready(proc)
        wait_web_up(web, url)
    except BaseException:
        stop_all([*procs, web])
        raise
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    return Stack(url=url, redis=client, env=full_env, procs=[*procs, web])


def fresh_each_test(stack: Stack) -> Iterator[Stack]:
    """`stack` for one more test of the module that shares it (`yield from` in a fixture):
    its Redis database emptied first, the processes the test added stopped at its end."""
    stack.redis.flushdb()
    kept = len(stack.procs)
    yield stack
    stop_all(stack.procs[kept:])
    del stack.procs[kept:]


@pytest.fixture(scope="session")
def stack(redis_url: str, fakellm: str) -> Iterator[Stack]:
    """The shared chatq stack most tests use."""
    s = start_stack(redis_url, fakellm, CHATQ_SSE_KEEPALIVE="2")
    yield s
    s.stop()


# One unit of `make test-slow`, run in turn by one process: the hosts of tests/multihost/ time
# partitions and failovers (a web host cut from Redis failed beside the full bench smoke), and
# the bench smoke saturates the cores on purpose. Their names would not collide (they carry
# the pid); the two would only steal each other's time. Together they take about half the run.
ALONE = ("tests/multihost/", "tests/test_bench_smoke.py")


@pytest.hookimpl(optionalhook=True)  # without pytest-xdist (`-p no:xdist`) too
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, but the files of ALONE are one unit. (`xdist_group` marks would say
    it, but pytest-xdist 3.8 puts groups in node ids, which pytest 9.2 no longer lets it
    change: they were ignored.)"""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndOneUnit(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "alone" if scope.startswith(ALONE) else scope

    return FilesAndOneUnit(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files marked `long` first, each group keeping the random order: a parallel run then
    does not end with one long file running alone."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session if a test key appears in a log of a process it started."""
    if hasattr(session.config, "workerinput"):
        # An xdist worker: the log folder is the whole run's, checked (and removed) once by
        # the process that started the workers, after all of them have ended.
        return
    leaks = [f"the {name} test key appears in {path}" for path, name in leaked_keys(LOG_DIR)]
    session.config.stash[LEAKS] = leaks
    if leaks:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif exitstatus == pytest.ExitCode.OK:
        # Logs of a clean session help nobody; those of a failed one are kept to be read.
        shutil.rmtree(LOG_DIR, ignore_errors=True)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Say which keys leaked where, and the seed that replays this test order."""
    leaks = config.stash.get(LEAKS, [])
    if leaks:
        terminalreporter.write_sep("=", "secrets check failed", red=True, bold=True)
        for line in leaks:
            terminalreporter.write_line(line, red=True)
    seed = _random_order_seed(config)
    if seed is not None:
        terminalreporter.write_line(
            f"random order: --random-order-seed={seed} (replay with `make test SEED={seed}`)"
        )


def _random_order_seed(config: pytest.Config) -> str | None:
    if not config.pluginmanager.has_plugin("random_order"):
        return None
    from random_order.config import Config as RandomOrder

    plugin = RandomOrder(config)
    return str(plugin.seed) if plugin.is_enabled else None


__all__ = ["ALICE_KEY", "BOB_KEY", "Stack", "fresh_each_test", "start_stack"]
