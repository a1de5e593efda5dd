"""The worker's connections to the upstream, pooled on urllib3 (requests' per-call work, its
environment look-ups and cookie jars, cost more than the call itself on a fast upstream).

Each connection tells the job calling through it when it is in use (worker/running.py's
Handle), so that a cancel cuts a call still waiting for its first byte, not only one reading
its answer. Proxies come from the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`), read
once per endpoint.

A cut call fails inside urllib3, which closes that connection and puts none back in its pool:
the next call opens a fresh one. Every other call leaves its connection pooled as before.
"""

from __future__ import annotations

import socket
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager, ProxyManager, Timeout
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.response import BaseHTTPResponse
from urllib3.util import make_headers

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


class UpstreamPools:
    """The worker's connection pools to the upstream endpoints, one per endpoint (through a
    proxy when the environment names one for it), each holding up to `maxsize` connections."""

    def __init__(self, endpoints: int, maxsize: int, ca_file: str = "") -> None:
        self._options: dict[str, Any] = {
            "num_pools": max(10, endpoints),
            "maxsize": maxsize,
            "socket_options": HTTPConnection.default_socket_options + KEEPALIVE_OPTIONS,
            "ca_certs": ca_file or None,  # None: the system's CAs
        }
        self._direct = PoolManager(**self._options)
        self._direct.pool_classes_by_scheme = POOLS
        self._by_origin: dict[str, PoolManager] = {}

    def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout: Timeout
    ) -> BaseHTTPResponse:
        """Send a POST; answer its response once the headers have come, the body unread."""
        response: BaseHTTPResponse = self._manager(url).urlopen(
            "POST",
            url,
            body=body,
            headers=headers,
            timeout=timeout,
            retries=False,  # retries are ours: they must see streamed text and the deadline
            redirect=False,  # an upstream's redirect is its error, not a place to send the key
            preload_content=False,
        )
        return response

    def _manager(self, url: str) -> PoolManager:
        """The manager for `url`'s origin: through the environment's proxy for it, if any."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        manager = self._by_origin.get(origin)
        if manager is None:
            manager = self._by_origin[origin] = self._for(parts.scheme, parts.hostname or "")
        return manager

    def _for(self, scheme: str, host: str) -> PoolManager:
        proxy = urllib.request.getproxies().get(scheme, "")
        if not proxy or urllib.request.proxy_bypass(host):
            return self._direct
        if proxy.startswith("socks"):
            from urllib3.contrib.socks import SOCKSProxyManager  # needs PySocks, as requests

            return SOCKSProxyManager(proxy, **self._options)
        manager = ProxyManager(proxy, proxy_headers=_proxy_auth(proxy), **self._options)
        manager.pool_classes_by_scheme = POOLS
        return manager


def _proxy_auth(proxy: str) -> dict[str, str] | None:
    """Basic credentials for the proxy, from its URL's user and password, as requests sends."""
    parts = urlsplit(proxy)
    if not parts.username:
        return None
    user_password = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    headers: dict[str, str] = make_headers(proxy_basic_auth=user_password)
    return headers
