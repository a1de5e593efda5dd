"""Where a webhook may connect: the destination's address is checked when connecting, and the
connection goes to the address checked, so a DNS answer that changes between a check and the
connect (DNS rebinding) cannot reach an address chatq/webhooks/addresses.py refuses."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError
from urllib3.util.connection import create_connection

from chatq.webhooks.addresses import address_allowed


class DestinationRefused(NewConnectionError):
    """The destination resolves only to addresses webhooks may not reach."""


def _allowed_addresses(host: str, port: int) -> list[tuple[str, int]]:
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    allowed = []
    for *_, sockaddr in found:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address_allowed(ip):
            allowed.append((str(sockaddr[0]), port))
    return allowed


class _Guard:
    """Mixed into urllib3's connections: resolve, check, then connect to a checked address."""

    allow_private = False
    host: str
    port: int
    timeout: Any
    source_address: Any
    socket_options: Any

    def _new_conn(self) -> socket.socket:
        conn: Any = self  # an HTTPConnection once mixed in
        host = self.host.strip("[]")
        if self.allow_private:
            targets = [(host, self.port)]
        else:
            targets = _allowed_addresses(host, self.port)
            if not targets:
                raise DestinationRefused(
                    conn,
                    f"{host} resolves to no address webhooks may reach (loopback, "
                    "private, link-local or reserved); see CHATQ_WEBHOOK_ALLOW_PRIVATE",
                )
        last: OSError | None = None
        for target in targets:
            try:
                return create_connection(
                    target, self.timeout, self.source_address, self.socket_options
                )
            except OSError as exc:
                last = exc
        raise NewConnectionError(conn, f"cannot connect to {host}: {last}")


def guarded_session(allow_private: bool, pool_size: int = 10) -> requests.Session:
    """A session that ignores proxy variables (a proxy would resolve names unchecked) and
    connects only where `address_allowed` says (anywhere when `allow_private`)."""
    guard = type("Guard", (_Guard,), {"allow_private": allow_private})
    http_conn = type("GuardedHTTPConnection", (guard, HTTPConnection), {})
    https_conn = type("GuardedHTTPSConnection", (guard, HTTPSConnection), {})
    http_pool = type("GuardedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn})
    https_pool = type("GuardedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn})
    adapter = HTTPAdapter(pool_connections=pool_size, pool_maxsize=pool_size)
    adapter.poolmanager.pool_classes_by_scheme = {"http": http_pool, "https": https_pool}
    session = requests.Session()
    session.trust_env = False  # a proxy would resolve the name itself, unchecked
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def causes(exc: BaseException, depth: int = 6) -> Iterator[BaseException]:
    """`exc`, then what requests and urllib3 wrapped in it (its `reason`, its first argument,
    or what it was raised in), down to `depth` levels."""
    seen: BaseException | None = exc
    for _ in range(depth + 1):
        if seen is None:
            return
        yield seen
        inner = seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None
        below = getattr(seen, "reason", None) or inner or seen.__context__
        seen = below if isinstance(below, BaseException) else None


def refused(exc: BaseException) -> bool:
    """Whether `exc` (as requests raised it) is a refused destination."""
    return any(isinstance(e, DestinationRefused) for e in causes(exc))
