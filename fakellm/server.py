"""The HTTP server: routing, API-key check, statistics and connection counting."""

from __future__ import annotations

import asyncio
import hmac
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader

from fakellm.chat import AttemptCounter, chat_completions
from fakellm.errors import ApiError, error_response
from fakellm.payloads import model_list
from fakellm.ratelimit import RateLimits

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]

_MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class Stats:
    """Counters served by `GET /stats`."""

    requests: int = 0
    connections_opened: int = 0
    connections_active: int = 0
    rate_limited: int = 0  # chat requests answered 429 for the RPM or TPM limit

    def reset(self) -> None:
        """Zero the counters; `connections_active` stays the real current number."""
        self.requests = 0
        self.connections_opened = 0
        self.rate_limited = 0


# The `traceparent` headers of the last this many chat requests, for `GET /stats/traceparents`.
TRACEPARENTS_KEPT = 1000


class CountingServer(web.Server):
    """aiohttp's low-level server, counting the TCP connections it accepts."""

    def __init__(self, handler: Handler, stats: Stats, **kwargs: Any) -> None:
        super().__init__(handler, request_factory=self._make_big_request, **kwargs)
        self._stats = stats

    def connection_made(self, handler: web.RequestHandler, transport: asyncio.Transport) -> None:
        """Count a newly accepted connection."""
        self._stats.connections_opened += 1
        self._stats.connections_active += 1
        super().connection_made(handler, transport)

    def connection_lost(
        self, handler: web.RequestHandler, exc: BaseException | None = None
    ) -> None:
        """Count a closed connection."""
        self._stats.connections_active -= 1
        super().connection_lost(handler, exc)

    def _make_big_request(
        self,
        message: RawRequestMessage,
        payload: StreamReader,
        protocol: web.RequestHandler,
        writer: AbstractStreamWriter,
        task: asyncio.Task[None],
    ) -> web.BaseRequest:
        # aiohttp's 1 MiB default is too small for long prompts.
        return web.BaseRequest(
            message,
            payload,
            protocol,
            writer,
            task,
            asyncio.get_running_loop(),
            client_max_size=_MAX_BODY_BYTES,
        )


def _json(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


class FakeLLM:
    """The application: routes requests and holds the in-memory state."""

    def __init__(self, api_key: str | None = None, limits: RateLimits | None = None) -> None:
        self.stats = Stats()
        self.traceparents: deque[str] = deque(maxlen=TRACEPARENTS_KEPT)
        self.limits = limits or RateLimits()
        self._api_key = api_key
        self._attempts = AttemptCounter()
        self._routes: dict[str, dict[str, Handler]] = {
            "/v1/chat/completions": {"POST": self._chat},
            "/v1/models": {"GET": self._models},
            "/stats": {"GET": self._stats},
            "/stats/reset": {"POST": self._reset},
            "/stats/traceparents": {"GET": self._traceparents},
            "/limits": {"GET": self._get_limits, "POST": self._set_limits},
        }

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """Dispatch one request; API errors become OpenAI error objects."""
        try:
            return await self._route(request)(request)
        except ApiError as error:
            return error_response(error)

    def _route(self, request: web.BaseRequest) -> Handler:
        methods = self._routes.get(request.path)
        if methods is None:
            raise ApiError(404, f"Invalid URL ({request.method} {request.path})")
        handler = methods.get(request.method)
        if handler is None:
            raise ApiError(405, f"Method {request.method} is not allowed on {request.path}")
        if request.path.startswith("/v1/"):
            self._authenticate(request)
        return handler

    def _authenticate(self, request: web.BaseRequest) -> None:
        if self._api_key is None:
            return
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        expected = self._api_key.encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            # Never echo the key, neither the one sent nor the expected one.
            raise ApiError(401, "Incorrect API key provided.", code="invalid_api_key")

    async def _chat(self, request: web.BaseRequest) -> web.StreamResponse:
        self.stats.requests += 1
        traceparent = request.headers.get("traceparent")
        if traceparent is not None:
            self.traceparents.append(traceparent)
        try:
            return await chat_completions(request, self._attempts, self.limits)
        except ApiError as error:
            if error.code == "rate_limit_exceeded" and error.kind in ("requests", "tokens"):
                self.stats.rate_limited += 1
            raise

    async def _get_limits(self, request: web.BaseRequest) -> web.StreamResponse:
        return _json(json.dumps(self.limits.describe()).encode())

    async def _set_limits(self, request: web.BaseRequest) -> web.StreamResponse:
        """`{"rpm": N, "tpm": N, "window_s": S}`: new limits, buckets full (0: no limit)."""
        try:
            wanted = json.loads(await request.read())
            rpm, tpm = int(wanted.get("rpm", 0)), int(wanted.get("tpm", 0))
            window_s = float(wanted.get("window_s", 60.0))
        except (ValueError, TypeError, AttributeError):
            raise ApiError(400, 'Send {"rpm": N, "tpm": N, "window_s": S}.') from None
        if rpm < 0 or tpm < 0 or not window_s > 0:
            raise ApiError(400, "rpm and tpm must be >= 0 and window_s > 0.")
        self.limits.set(rpm, tpm, window_s)
        return await self._get_limits(request)

    async def _models(self, request: web.BaseRequest) -> web.StreamResponse:
        return _json(model_list())

    async def _stats(self, request: web.BaseRequest) -> web.StreamResponse:
        return _json(json.dumps(asdict(self.stats)).encode())

    async def _traceparents(self, request: web.BaseRequest) -> web.StreamResponse:
        """The `traceparent` of each recent chat request that sent one, oldest first."""
        return _json(json.dumps({"traceparents": list(self.traceparents)}).encode())

    async def _reset(self, request: web.BaseRequest) -> web.StreamResponse:
        self.stats.reset()
        self.traceparents.clear()
        return _json(json.dumps(asdict(self.stats)).encode())


def make_server(app: FakeLLM) -> CountingServer:
    """Build the low-level server: no access log, handlers cancelled when clients leave."""
    return CountingServer(app.handle, app.stats, handler_cancellation=True, access_log=None)


async def serve(
    host: str, port: int, api_key: str | None, limits: RateLimits, stop: asyncio.Event
) -> None:
    """Serve until `stop` is set."""
    runner = web.ServerRunner(make_server(FakeLLM(api_key, limits)), shutdown_timeout=0.5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=4096)
        await site.start()
        print(f"fakellm listening on {site.name}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()
