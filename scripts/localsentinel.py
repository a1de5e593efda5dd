"""A throwaway Redis behind Sentinel on loopback ports, for the tests: a primary, its replicas,
and three Sentinels that promote a replica within about two seconds of the primary's loss."""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from scripts.localcluster import LOOPBACK, Spot
from scripts.localredis import (
    LocalRedis,
    _die_with_parent,
    free_port,
    redis_server_binary,
    temp_dir,
)

MASTER_NAME = "chatq-test"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


class SentinelProcess:
    """One `redis-server FILE --sentinel` with a generated configuration, at `spot`."""

    def __init__(self, primary: LocalRedis, quorum: int, spot: Spot = LOOPBACK) -> None:
        self.host, self.prefix = spot
        self.port = free_port()
        self.dir = temp_dir("chatq-sentinel-")
        self.config = os.path.join(self.dir, "sentinel.conf")
        with open(self.config, "w") as out:
            out.write(
                f"port {self.port}\nbind {self.host}\ndir {self.dir}\n"
                f"protected-mode {'yes' if self.host == '127.0.0.1' else 'no'}\n"
                f"sentinel monitor {MASTER_NAME} {primary.host} {primary.port} {quorum}\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {MASTER_NAME} 2\n"
            )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> SentinelProcess:
        """Start it (it rewrites its configuration file as it learns the others)."""
        log = open(os.path.join(self.dir, "sentinel.log"), "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*self.prefix, redis_server_binary(), self.config, "--sentinel"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        return self

    def client(self) -> redis.Redis:
        """A client of this Sentinel."""
        return _client(self.host, self.port)

    def stop(self) -> None:
        """SIGKILL it, if it still runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


class LocalSentinel:
    """A primary with `replicas` replicas and three Sentinels watching them (quorum 2): the
    primary at the first of `spots`, replica i at the next ones, Sentinel i at spot i (all
    modulo their number; by default all on loopback)."""

    def __init__(self, replicas: int = 2, spots: tuple[Spot, ...] = (LOOPBACK,)) -> None:
        def spot(i: int) -> Spot:
            return spots[i % len(spots)]

        # Replicas sync at once, not after the default 5 s of waiting for more of them.
        quick = ("--repl-diskless-sync-delay", "0")
        host, prefix = spot(0)
        self.primary = LocalRedis(appendonly=True, extra_args=quick, host=host, prefix=prefix)
        follow = (*quick, "--replicaof", self.primary.host, str(self.primary.port))
        self.replicas = [
            LocalRedis(
                appendonly=True, extra_args=follow, host=spot(i + 1)[0], prefix=spot(i + 1)[1]
            )
            for i in range(replicas)
        ]
        self.sentinels = [SentinelProcess(self.primary, 2, spot(i)) for i in range(3)]

    @property
    def servers(self) -> list[LocalRedis]:
        """Every Redis server, the first primary first."""
        return [self.primary, *self.replicas]

    @property
    def env(self) -> dict[str, str]:
        """The CHATQ_* settings of a chatq on this Redis."""
        return {
            "CHATQ_REDIS_SENTINELS": ",".join(f"{s.host}:{s.port}" for s in self.sentinels),
            "CHATQ_REDIS_MASTER_NAME": MASTER_NAME,
        }

    def start(self, timeout_s: float = 30.0) -> LocalSentinel:
        """Start everything; ready once every Sentinel knows the others and every replica."""
        for server in self.servers:
            server.start()
        for sentinel in self.sentinels:
            sentinel.start()
        deadline = time.monotonic() + timeout_s
        while not self.settled():
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the Sentinels did not find each other and the replicas")
            time.sleep(0.1)
        return self

    def settled(self) -> bool:
        """Every replica in sync, every Sentinel sees the two others and the replicas (a
        failover before that takes tens of seconds instead of about two)."""
        try:
            links = [_client(r.host, r.port).info("replication") for r in self.replicas]
            views: list[Any] = [s.client().sentinel_master(MASTER_NAME) for s in self.sentinels]
        except redis.RedisError:
            return False
        return all(link.get("master_link_status") == "up" for link in links) and all(
            v["num-other-sentinels"] == 2 and v["num-slaves"] == len(self.replicas) for v in views
        )

    def primary_port(self) -> int | None:
        """The port the Sentinels name primary now (None if none answers)."""
        for sentinel in self.sentinels:
            try:
                host_port: Any = sentinel.client().sentinel_get_master_addr_by_name(MASTER_NAME)
            except redis.RedisError:
                continue
            if host_port:
                return int(host_port[1])
        return None

    def named_primary(self) -> LocalRedis:
        """The server the Sentinels name primary now."""
        port = self.primary_port()
        assert port is not None, "no Sentinel names a primary"
        return self.server_at(port)

    def server_at(self, port: int) -> LocalRedis:
        """The server listening on `port`."""
        return next(s for s in self.servers if s.port == port)

    def kill_primary(self, timeout_s: float = 30.0) -> tuple[LocalRedis, float]:
        """SIGKILL the primary; return it, and the seconds until a replica is promoted."""
        victim = self.named_primary()
        victim.stop(kill=True)
        killed = time.monotonic()
        while self.primary_port() in (victim.port, None):
            if time.monotonic() - killed > timeout_s:
                raise RuntimeError(f"no replica was promoted within {timeout_s} s")
            time.sleep(0.05)
        return victim, time.monotonic() - killed

    def sample(self) -> Sample:
        """Who is primary now: as the Sentinels name it, and as the servers answer."""
        named = self.primary_port()
        roles = {server.port: _replication(server) for server in self.servers}
        primaries = frozenset(p for p, info in roles.items() if info.get("role") == "master")
        online = sum(1 for k, v in roles.get(named or 0, {}).items() if _online_replica(k, v))
        return Sample(time.monotonic(), named, primaries, online)

    def watch(self, every_s: float = 0.05) -> Watch:
        """A started Watch of this Redis's primaries."""
        watch = Watch(self, every_s)
        watch.start()
        return watch

    def stop(self) -> None:
        """Stop every process started here."""
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in self.servers:
            server.stop(kill=True)


@dataclass(frozen=True)
class Sample:
    """Who was primary at `at` (time.monotonic()): the port the Sentinels named, the ports of
    the servers answering as primaries, and how many replicas the named one had online."""

    at: float
    named: int | None
    primaries: frozenset[int]
    replicas: int

    def writable(self, replicas: int) -> bool:
        """One primary, the one the Sentinels name, with at least `replicas` replicas."""
        return (
            self.named is not None
            and self.primaries == {self.named}
            and (self.replicas >= replicas)
        )


class Watch(threading.Thread):
    """Samples of who is primary, every `every_s` until stopped: one failover may be followed
    by a second (a Sentinel that misses the new primary's first answers within its
    down-after time takes it for down), with two primaries until the Sentinels agree."""

    def __init__(self, watched: LocalSentinel, every_s: float) -> None:
        super().__init__(daemon=True)
        self.watched, self.every_s = watched, every_s
        self.samples: list[Sample] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.every_s):
            self.samples.append(self.watched.sample())

    def stop(self) -> None:
        """Stop sampling."""
        self.stopping.set()
        self.join(5)

    def writable_since(self, replicas: int) -> float | None:
        """Since when (time.monotonic()) every sample has been writable with `replicas`, the
        named primary unchanged; None if the last one is not."""
        since = None
        for sample in reversed(list(self.samples)):
            if not sample.writable(replicas) or sample.named != self.samples[-1].named:
                break
            since = sample.at
        return since

    def promotions(self) -> int:
        """How many times the Sentinels named another primary."""
        named = [s.named for s in self.samples if s.named is not None]
        return sum(1 for before, after in itertools.pairwise(named) if before != after)


def _replication(server: LocalRedis) -> dict[str, Any]:
    """`server`'s INFO replication ({} if it does not answer)."""
    try:
        return dict(_client(server.host, server.port).info("replication"))
    except redis.RedisError:
        return {}


def _online_replica(key: str, value: Any) -> bool:
    return key.startswith("slave") and isinstance(value, dict) and value.get("state") == "online"


def _client(host: str, port: int) -> redis.Redis:
    # No retries: redis-py's default tries a refused connection again for seconds, and every
    # caller here polls.
    return redis.Redis(
        host, port, decode_responses=True, socket_timeout=1.0, retry=Retry(NoBackoff(), 0)
    )
