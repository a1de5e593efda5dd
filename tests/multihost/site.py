"""A chatq site over network namespaces: which host runs what, and how the tests talk to it.

The client host is on two networks: `front`, where it reaches the web hosts as a load balancer
would, and `back`, where it looks at Redis and fakellm as an operator would. Web hosts are on
both; workers, Redis and the upstream only on `back`, so that cutting a web host's `back` link
cuts it from Redis while clients still reach it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import redis
import requests
from redis.cluster import RedisCluster

from chatq.config import settings as config
from chatq.topology import connections as redis_conn
from scripts.localcluster import LocalCluster
from scripts.localredis import LocalRedis
from scripts.localsentinel import LocalSentinel
from tests.multihost.netns import Net
from tests.procs import ALICE_KEY, Proc, base_env, start_fakellm, start_web, start_worker

WEBS = ("web-1", "web-2")
REDIS_HOSTS = (("redis-b", "rb"), ("redis-c", "rc"))
# The back-network hosts every site has (name, tag in interface names).
HOSTS = (("worker-1", "k1"), ("worker-2", "k2"), ("redis-a", "ra"), *REDIS_HOSTS, ("llm", "llm"))
WORKERS = ("worker-1", "worker-2")
BOTH = ("front", "back")


def make_net(*extra: tuple[str, str]) -> Net:
    """The hosts of the site, and `extra` (name, tag) back-network hosts; no process yet."""
    net = Net()
    try:
        net.add("client", "cl", BOTH)
        net.add("web-1", "w1", BOTH)
        net.add("web-2", "w2", BOTH)
        for name, tag in (*HOSTS, *extra):
            net.add(name, tag)
    except BaseException:
        net.delete()
        raise
    return net


def spot(net: Net, name: str) -> tuple[str, tuple[str, ...]]:
    """Where a server runs on host `name`: (its address, the command prefix)."""
    host = net.hosts[name]
    return host.ip, tuple(host.prefix)


@dataclass
class Site:
    """The running processes, per host, and the URLs the client uses."""

    net: Net
    env: dict[str, str]
    upstream: str  # fakellm's base URL, without /v1
    state: Any  # a Redis or RedisCluster client of the job store
    webs: dict[str, str] = field(default_factory=dict)
    procs: dict[str, list[Proc]] = field(default_factory=dict)
    servers: list[LocalRedis] = field(default_factory=list)
    sentinel: LocalSentinel | None = None

    def session(self) -> requests.Session:
        """An HTTP session of alice's (use it from one thread only)."""
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {ALICE_KEY}"
        return s

    def calls(self) -> int:
        """Requests fakellm has answered so far."""
        return int(requests.get(f"{self.upstream}/stats", timeout=5).json()["requests"])

    def add_worker(self, host: str) -> Proc:
        """Start a worker process on `host`."""
        proc = start_worker(self.env, "", self.net.hosts[host].prefix)
        self.procs.setdefault(host, []).append(proc)
        return proc

    def add_web(self, host: str) -> str:
        """Start a web process on `host`, listening on its front address; its URL."""
        h = self.net.hosts[host]
        proc, url = start_web(self.env, h.addresses["front"], h.prefix)
        self.procs.setdefault(host, []).append(proc)
        self.webs[host] = url
        return url

    def lose(self, host: str) -> list[int]:
        """SIGKILL every process on `host` and cut its link: the host is gone."""
        pids = self.net.pids(host)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.net.cut(host)
        for proc in self.procs.get(host, []):
            if proc.process is not None:
                proc.process.wait(10)
        return pids

    def stop(self) -> None:
        """Stop every process, webs first, then workers, the upstream and Redis."""
        for host in [*WEBS, *WORKERS, "llm"]:
            for proc in self.procs.get(host, []):
                proc.stop()
        for server in self.servers:
            server.stop()


# chatq's Redis URL behind Sentinel: its host is never used, only its database.
UNUSED_URL = "redis://127.0.0.1:1/0"


def start_site(net: Net, **env: str) -> Site:
    """Redis on redis-a (unless env names Sentinels), fakellm on llm, a worker and a web on
    each of their hosts; call it from the client host (`net.inside("client")`)."""
    servers = []
    redis_url = UNUSED_URL
    if "CHATQ_REDIS_SENTINELS" not in env:
        address, prefix = spot(net, "redis-a")
        servers.append(LocalRedis(host=address, prefix=prefix).start())
        redis_url = servers[0].url
    llm = net.hosts["llm"]
    fake, fake_url = start_fakellm(host=llm.ip, prefix=llm.prefix)
    full_env = base_env(redis_url, fake_url, **env)
    site = Site(net, full_env, fake_url.removesuffix("/v1"), _state(full_env), servers=servers)
    site.procs["llm"] = [fake]
    try:
        for host in WORKERS:
            site.add_worker(host)
        for host in WEBS:
            site.add_web(host)
    except BaseException:
        site.stop()
        raise
    return site


def _state(env: dict[str, str]) -> Any:
    """A client of the job store these settings name."""
    if env.get("CHATQ_STATE_URL"):
        return RedisCluster.from_url(env["CHATQ_STATE_URL"], decode_responses=True)
    if env.get("CHATQ_REDIS_SENTINELS"):
        return redis_conn.connect_sentinel(config.load(env), max_connections=8)
    return redis.Redis.from_url(env["CHATQ_REDIS_URL"], decode_responses=True)


@contextlib.contextmanager
def running_site(*extra: tuple[str, str], store: str = "redis", **env: str) -> Iterator[Site]:
    """A whole site on fresh hosts (and `extra` ones), the calling thread on the client host
    meanwhile. The job store (and broker) on redis-a's Redis; with `store="cluster"`, the store
    on a 3-primary Cluster over redis-a, -b and -c (one replica each, on the next host), the
    broker staying on redis-a; with `store="sentinel"`, both on a primary on redis-a, replicas
    on redis-b and -c, and a Sentinel on each (site.sentinel)."""
    net = make_net(*extra)
    made: LocalCluster | LocalSentinel | None = None
    try:
        with net.inside("client"):
            spots = tuple(spot(net, name) for name in ("redis-a", *dict(REDIS_HOSTS)))
            if store == "cluster":
                made = LocalCluster(primaries=3, replicas=1, spots=spots)
                env = {**env, "CHATQ_STATE_URL": made.start().url}
            elif store == "sentinel":
                made = LocalSentinel(replicas=2, spots=spots)
                env = {**env, **made.start().env}
            site = start_site(net, **env)
            site.sentinel = made if isinstance(made, LocalSentinel) else None
            try:
                yield site
            finally:
                site.stop()
    finally:
        try:
            if made is not None:
                made.stop()
        finally:
            net.delete()


def job_records(site: Site, ids: list[str]) -> list[dict[str, Any]]:
    """The jobs' Redis records (status, attempts, timestamps), in the order of `ids`."""
    from chatq import keys

    pipe = site.state.pipeline(transaction=False)
    for job_id in ids:
        pipe.hgetall(keys.job(job_id))
    return list(pipe.execute())
