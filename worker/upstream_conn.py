"""The upstream session's connections: each tells the job calling through it when it is in
use (worker/running.py's Handle), so that a cancel cuts a call still waiting for its first
byte, not only one reading its answer.

A cut call fails inside urllib3, which closes that connection and puts none back in its pool:
the next call opens a fresh one. Every other call leaves its connection pooled as before.
"""

from __future__ import annotations

import socket
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, ProxyManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.response import BaseHTTPResponse

from worker.running import calling_handle

KEEPALIVE_OPTIONS = [
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30),
    (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10),
    (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3),
]


def _in_use(connection: HTTPConnection) -> None:
    handle = calling_handle()
    if handle is not None:
        handle.sending(connection)


def _answered() -> None:
    handle = calling_handle()
    if handle is not None:
        handle.answered()


class _Reporting(HTTPConnection):
    """An HTTPConnection that reports itself to the job calling through it."""

    def connect(self) -> None:
        """Connect, then hand the socket to the job (a new connection connects here)."""
        super().connect()
        _in_use(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        """Send the request, once the job knows the connection (a pooled one is reused here)."""
        _in_use(self)
        super().request(*args, **kwargs)

    def getresponse(self) -> Any:
        """Wait for the answer's headers; then the connection is the response's."""
        try:
            response: BaseHTTPResponse = super().getresponse()
            return response
        finally:
            _answered()


class ReportingConnection(_Reporting):
    """Plain HTTP."""


class ReportingTlsConnection(_Reporting, HTTPSConnection):
    """HTTPS."""


class _Pool(HTTPConnectionPool):
    ConnectionCls = ReportingConnection


class _TlsPool(HTTPSConnectionPool):
    ConnectionCls = ReportingTlsConnection


POOLS: dict[str, type[HTTPConnectionPool]] = {"http": _Pool, "https": _TlsPool}


class UpstreamAdapter(HTTPAdapter):
    """An HTTPAdapter of reporting connections, with TCP keepalive."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        """The pool manager, making pools of reporting connections."""
        kwargs["socket_options"] = HTTPConnection.default_socket_options + KEEPALIVE_OPTIONS
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        """The manager of an HTTP(S) proxy makes reporting connections too (SOCKS: its own)."""
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if isinstance(manager, ProxyManager):
            manager.pool_classes_by_scheme = POOLS
        return manager
