"""scripts/localredis.py: a throwaway server whose chosen ports another process took before it
bound them starts on others (a parallel test run makes that race common)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from scripts.localredis import LocalRedis, PortTaken, answers, free_port


def _taken(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_port_taken_since_it_was_chosen_is_chosen_again() -> None:
    server = LocalRedis()
    with _taken(server.port):
        taken = server.port
        server.start()
        try:
            assert server.port != taken and answers(server.url)
        finally:
            server.stop()


def test_a_cluster_bus_port_taken_since_it_was_chosen_is_chosen_again() -> None:
    with _taken(0) as sock:
        bus = str(sock.getsockname()[1])
        server = LocalRedis(extra_args=("--cluster-enabled", "yes", "--cluster-port", bus))
        server.start()
        try:
            assert server.extra_args[-1] != bus and answers(server.url)
        finally:
            server.stop()


def test_a_port_given_by_the_caller_is_not_changed() -> None:
    server = LocalRedis()
    with _taken(server.port):
        given = LocalRedis(port=server.port)
        with pytest.raises(PortTaken):
            given.start()


def test_free_ports_are_below_the_range_clients_connect_from() -> None:
    # A client's connect() takes any free port of that range: one handed out from it could be
    # gone before the server it was for binds it.
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(50)}
    assert all(1024 <= port < low for port in ports), sorted(ports)
    assert len(ports) > 40  # spread out, not one port for every caller
