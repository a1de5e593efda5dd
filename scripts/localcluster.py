"""A throwaway Redis Cluster on loopback ports, for the tests: primaries and their replicas.

Built with CLUSTER commands (no redis-cli needed): slots split evenly over the primaries, every
node met, each replica following its primary; ready once every node says `cluster_state:ok`.
"""

from __future__ import annotations

import time

import redis

from scripts.localredis import LocalRedis, free_port, redis_server_binary

SLOTS = 16384


def sharded_pubsub_supported() -> bool:
    """Whether the redis-server here has sharded pub/sub (Redis 7)."""
    import subprocess

    version = subprocess.run(
        [redis_server_binary(), "--version"], capture_output=True, text=True
    ).stdout
    number = version.split("v=", 1)[-1].split(" ", 1)[0]
    return int(number.split(".")[0] or 0) >= 7


# Where a node runs: the address it binds, and the command prefix that runs it there (such as
# `ip netns exec NS`, for the multi-host tests); the default is loopback.
Spot = tuple[str, tuple[str, ...]]
LOOPBACK: Spot = ("127.0.0.1", ())


def _node(spot: Spot) -> LocalRedis:
    # The cluster bus gets a free port of its own (by default it is the port + 10000).
    bus_port = free_port()
    args = (
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "1000",
        "--appendonly",
        "yes",
        "--cluster-port",
        str(bus_port),
    )
    return LocalRedis(extra_args=args, host=spot[0], prefix=spot[1])


def _bus_port(node: LocalRedis) -> str:
    return node.extra_args[node.extra_args.index("--cluster-port") + 1]


class LocalCluster:
    """`primaries` primaries, each with `replicas` replicas; primary i on `spots[i]` (modulo
    their number), its replicas on the spots after it, so that no replica shares a primary's
    host while there are enough."""

    def __init__(
        self, primaries: int = 3, replicas: int = 0, spots: tuple[Spot, ...] = (LOOPBACK,)
    ) -> None:
        def spot(i: int) -> Spot:
            return spots[i % len(spots)]

        self.primaries = [_node(spot(i)) for i in range(primaries)]
        self.replicas = [
            [_node(spot(i + 1 + k)) for k in range(replicas)] for i in range(primaries)
        ]

    @property
    def nodes(self) -> list[LocalRedis]:
        """Every node, primaries first."""
        return [*self.primaries, *(r for group in self.replicas for r in group)]

    @property
    def url(self) -> str:
        """A redis:// URL of one node (a cluster client finds the others)."""
        return self.primaries[0].url

    def start(self, timeout_s: float = 30.0) -> LocalCluster:
        """Start the nodes, share the slots out, join them, and wait until the cluster is ok."""
        for node in self.nodes:
            node.start()
        clients = [redis.Redis(n.host, n.port, decode_responses=True) for n in self.nodes]
        share = SLOTS // len(self.primaries)
        for i, client in enumerate(clients[: len(self.primaries)]):
            last = SLOTS - 1 if i == len(self.primaries) - 1 else (i + 1) * share - 1
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        for node in self.nodes[1:]:
            clients[0].execute_command("CLUSTER", "MEET", node.host, node.port, _bus_port(node))
        self._follow(clients, timeout_s)
        deadline = time.monotonic() + timeout_s
        while not all(
            c.execute_command("CLUSTER", "INFO").find("cluster_state:ok") >= 0 for c in clients
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not become ready")
            time.sleep(0.1)
        return self

    def _follow(self, clients: list[redis.Redis], timeout_s: float) -> None:
        """Make each replica follow its primary, once it knows the primary's node id."""
        deadline = time.monotonic() + timeout_s
        for index, group in enumerate(self.replicas):
            primary_id = clients[index].execute_command("CLUSTER", "MYID")
            for replica in group:
                client = redis.Redis(replica.host, replica.port, decode_responses=True)
                while True:
                    try:
                        client.execute_command("CLUSTER", "REPLICATE", primary_id)
                        break
                    except redis.ResponseError:  # it has not heard of the primary yet
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)

    def stop(self) -> None:
        """Stop every node."""
        for node in self.nodes:
            node.stop()
