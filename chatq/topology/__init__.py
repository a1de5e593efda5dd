"""Redis as chatq reaches it: connections, checks of its settings, replicas."""

from chatq.topology.checks import UnsafeRedis, check_at_start, inspect
from chatq.topology.connections import (
    BACKEND_ERRORS,
    connect,
    connect_main,
    connect_state,
    is_backend_error,
    primary_address,
    sentinel_options,
    state_url,
    tls_options,
)
from chatq.topology.replicas import NO_WAIT, ReplicasBehind, Replication, replication, run_and_wait

__all__ = [
    "BACKEND_ERRORS",
    "NO_WAIT",
    "ReplicasBehind",
    "Replication",
    "UnsafeRedis",
    "check_at_start",
    "connect",
    "connect_main",
    "connect_state",
    "inspect",
    "is_backend_error",
    "primary_address",
    "replication",
    "run_and_wait",
    "sentinel_options",
    "state_url",
    "tls_options",
]
