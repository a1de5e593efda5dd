"""Starting chatq's real processes for a benchmark, with the tests' own helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from scripts.localredis import LocalRedis
from tests.procs import Proc, base_env, start_web, start_worker


@dataclass
class ChatqStack:
    """A Redis of its own, `python -m worker` processes and one `python -m web`."""

    redis: LocalRedis
    url: str
    web: Proc
    env: dict[str, str]
    workers: list[Proc] = field(default_factory=list)

    def client(self) -> redis.Redis:
        """A client of this stack's Redis, decoding replies."""
        return redis.Redis.from_url(self.redis.url, decode_responses=True)

    def pids(self) -> dict[str, int]:
        """Named pids, for CPU and memory readings."""
        assert self.redis.process is not None
        named = {"web": self.web.pid, "redis": self.redis.process.pid}
        for i, worker in enumerate(self.workers):
            named["worker" if i == 0 else f"worker{i}"] = worker.pid
        return named

    def python_pids(self) -> dict[str, int]:
        """The chatq processes only (what py-spy can profile)."""
        return {k: v for k, v in self.pids().items() if k != "redis"}

    def stop(self) -> None:
        """Stop every process of the stack."""
        for proc in [self.web, *self.workers]:
            proc.stop()
        self.redis.stop()


def start_chatq(upstream: str, workers: int = 1, **env: str) -> ChatqStack:
    """A chatq on its own Redis; `env` sets CHATQ_* overrides."""
    return start_chatq_on(LocalRedis().start(), "", upstream, workers, env)


def start_chatq_on(
    server: LocalRedis, redis_url: str, upstream: str, workers: int, env: dict[str, str]
) -> ChatqStack:
    """A chatq on `server`, its processes reaching it at `redis_url` (a proxy in front of it)
    or, when that is empty, directly; `env` sets CHATQ_* overrides."""
    full_env = base_env(redis_url or server.url, upstream, **env)
    procs = [start_worker(full_env, server.url) for _ in range(workers)]
    web, url = start_web(full_env)
    return ChatqStack(redis=server, url=url, web=web, env=full_env, workers=procs)
