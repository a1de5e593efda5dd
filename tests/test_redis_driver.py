"""Our Redis clients name themselves as redis-py does (CLIENT SETINFO, Redis 7.2 on), with the
version given once rather than read from the package metadata for each new connection."""

from __future__ import annotations

import redis

from chatq.topology import connections as redis_conn


def test_a_new_connection_carries_redis_py_and_its_version(own_redis_url: str) -> None:
    client = redis_conn.connect(own_redis_url, max_connections=4)
    conn = client.connection_pool.make_connection()
    assert conn.driver_info is not None
    assert (conn.driver_info.formatted_name, conn.driver_info.lib_version) == (
        "redis-py",
        redis.__version__,
    )
    assert client.ping()
    client.close()
