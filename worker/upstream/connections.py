"""The worker's connections to the upstream: a pooled `requests.Session` whose mounted
HTTPAdapter keeps one urllib3 pool per endpoint.

requests' per-call work is kept to what a call needs: no environment look-up per call
(`trust_env` is off: each endpoint's proxy is read from the environment once, and neither
requests' CA bundle nor `.netrc` is used); a request's URL and headers are prepared once per
endpoint and copied for each call, so that a call prepares only its body (`Session.request`
would merge cookies and settings and parse the URL each time); no cookie is kept; the answer
is streamed (`stream=True`), its body unread until the caller reads it.

Retries that belong to the transport are urllib3's (`TRANSPORT_RETRY`): a connection that
could not be made is tried once more at once, since nothing was sent. Every other retry is the
job's own (worker/run/runner.py): it must see streamed text, Retry-After and the deadline.

Each connection tells the job calling through it when it is in use (worker/jobs/running.py's
Handle), so that a cancel cuts a call still waiting for its first byte, not only one reading
its answer. A cut call fails inside urllib3, which closes that connection and puts none back in
its pool: the next call opens a fresh one. Every other call leaves its connection pooled.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from http import cookiejar
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.models import PreparedRequest
from requests.utils import get_environ_proxies
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, ProxyManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.response import BaseHTTPResponse
from urllib3.util import Retry

from worker.jobs import calling_handle

KEEPALIVE_OPTIONS = [
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30),
    (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10),
    (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3),
]
# One more try, at once, of a connection that failed (refused, unresolved, timed out): the
# request was not sent. Nothing else is retried here: not a read (a POST may have been
# answered), not a status, not a redirect (an upstream's redirect is its error, not a place to
# send the key).
TRANSPORT_RETRY = Retry(total=None, connect=1, read=False, redirect=False, status=0, other=0)


def _in_use(connection: HTTPConnection) -> None:
    handle = calling_handle()
    if handle is not None:
        handle.sending(connection)


def _answered() -> None:
    handle = calling_handle()
    if handle is not None:
        handle.answered()


class _Reporting(HTTPConnection):
    """An HTTPConnection that reports itself to the job calling through it, and sends a
    request's header block together with its body's first bytes."""

    # While a request is being sent: its header block, until the body's first bytes come.
    _head: bytes | None = None

    def connect(self) -> None:
        """Connect, then hand the socket to the job (a new connection connects here)."""
        super().connect()
        _in_use(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        """Send the request, once the job knows the connection (a pooled one is reused here):
        one send, where urllib3 makes one for the header block and another for the body (on
        loopback each runs the upstream's TCP path too, and wakes it)."""
        _in_use(self)
        self._head = b""
        try:
            super().request(*args, **kwargs)
            head = self._head  # a request without a body: its header block alone
        finally:
            self._head = None
        if head:
            super().send(head)

    def send(self, data: Any) -> None:
        """Keep the header block (the first bytes a request sends); send it with the next."""
        head = self._head
        if head is None or not isinstance(data, bytes):
            super().send(data)
        elif not head:
            self._head = data
        else:
            self._head = b""
            super().send(head + data)

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


class _NoCookies(cookiejar.CookiePolicy):
    """Keeps no cookie: an upstream's cookie must not follow one tenant's call to the next."""

    netscape = True
    rfc2965 = hide_cookie2 = False

    def set_ok(self, cookie: cookiejar.Cookie, request: Any) -> bool:
        """Refuse every cookie."""
        return False

    def return_ok(self, cookie: cookiejar.Cookie, request: Any) -> bool:
        """Send none."""
        return False


class UpstreamAdapter(HTTPAdapter):
    """An HTTPAdapter of reporting connections with TCP keepalive, certificates checked against
    `ca_file` (else the system's CAs), set once on its pools instead of per call."""

    def __init__(self, endpoints: int, maxsize: int, ca_file: str = "") -> None:
        self._options: dict[str, Any] = {
            "socket_options": HTTPConnection.default_socket_options + KEEPALIVE_OPTIONS,
            "ca_certs": ca_file or None,  # None: the system's CAs
        }
        super().__init__(
            pool_connections=max(10, endpoints), pool_maxsize=maxsize, max_retries=TRANSPORT_RETRY
        )

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        """The pool manager, making pools of reporting connections."""
        super().init_poolmanager(connections, maxsize, block, **self._options, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        """The manager of an HTTP(S) proxy makes reporting connections too (SOCKS: its own)."""
        manager = super().proxy_manager_for(proxy, **self._options, **proxy_kwargs)
        if isinstance(manager, ProxyManager):
            manager.pool_classes_by_scheme = POOLS
        return manager

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        """Nothing per call: the pools check certificates as set in `__init__` (requests would
        look up its own CA bundle on disk for every call, and use it instead of the system's)."""


class UpstreamSession(requests.Session):
    """The worker's session to its upstream endpoints (`urls`): up to `maxsize` pooled
    connections per endpoint, each endpoint's proxy read from the environment once."""

    def __init__(self, urls: Sequence[str], maxsize: int, ca_file: str = "") -> None:
        super().__init__()
        self.trust_env = False
        self.proxies = environment_proxies(urls)
        self.cookies.set_policy(_NoCookies())
        adapter = UpstreamAdapter(len(urls), maxsize, ca_file)
        self.mount("http://", adapter)
        self.mount("https://", adapter)
        # (url, headers) -> the request's head, prepared once; an endpoint's headers are the same
        # for every call, so this holds one entry per endpoint.
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...]], PreparedRequest] = {}

    def post_streamed(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        timeout_s: tuple[float, float],
        per_call: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send a POST; answer its response once the headers have come, the body unread.
        `timeout_s`: seconds to connect, and to wait for each read; `per_call`: headers of this
        call only (its `traceparent`), kept out of the prepared heads."""
        request = self._head(url, headers).copy()
        if per_call:
            request.headers.update(per_call)
        request.prepare_body(body, None)
        return self.send(
            request,
            stream=True,
            timeout=timeout_s,
            allow_redirects=False,
            proxies=self.proxies,
            verify=True,
        )

    def _head(self, url: str, headers: Mapping[str, str]) -> PreparedRequest:
        key = (url, tuple(headers.items()))
        head = self._heads.get(key)
        if head is None:
            head = PreparedRequest()
            head.prepare_method("POST")
            head.prepare_url(url, None)
            head.prepare_headers(headers)
            self._heads[key] = head
        return head


def environment_proxies(urls: Sequence[str]) -> dict[str, str]:
    """The proxy of each endpoint that the environment names one for (`HTTPS_PROXY` or
    `HTTP_PROXY` by the URL's scheme, unless `NO_PROXY` lists its host), keyed as requests
    looks them up; a proxy URL's user and password go to it as Proxy-Authorization."""
    proxies: dict[str, str] = {}
    for url in urls:
        parts = urlsplit(url)
        proxy = get_environ_proxies(url).get(parts.scheme)
        if proxy and parts.hostname:
            proxies[f"{parts.scheme}://{parts.hostname}"] = proxy
    return proxies
