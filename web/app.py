"""The Flask application factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask, Request
from flask.sessions import NullSession, SecureCookieSessionInterface

from chatq import broker, config, runtime, topology, tracing
from chatq.broker import make_celery
from chatq.config import Settings
from chatq.jobs import Listener, LocalCache, Rates, Store
from chatq.topology import replication
from web import batches, chat, http, jobs, metrics, pages, responses, webhooks
from web import tracing as web_tracing
from web.admission import Admission, HeldCounts, add_rate_headers, mark_unheld
from web.context import Services
from web.http import KeyRing

MAX_KEPT_FUNCTIONS = 1000


class _NoSessions(SecureCookieSessionInterface):
    """The API keeps no sessions: every request shares one empty, read-only session rather
    than making its own (two objects more that each parked request keeps)."""

    def __init__(self) -> None:
        self.shared = NullSession()

    def open_session(self, app: Flask, request: Request) -> NullSession:
        """The shared empty session (never saved: Flask saves no null session)."""
        return self.shared


class _App(Flask):
    """Flask, which asks whether a view or hook is `async def` once per function rather than
    on each call: a request makes about a dozen such calls (`inspect.iscoroutinefunction`)."""

    def __init__(self, import_name: str) -> None:
        super().__init__(import_name)
        self._sync: dict[Callable[..., Any], Callable[..., Any]] = {}

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """`func`, or its sync wrapper when it is a coroutine function (Flask's answer, kept)."""
        sync = self._sync.get(func)
        if sync is None:
            sync = super().ensure_sync(func)
            if len(self._sync) < MAX_KEPT_FUNCTIONS:  # bounded, should a caller pass closures
                self._sync[func] = sync
        return sync


def _services(settings: Settings) -> Services:
    client = topology.connect_state(settings)
    celery = make_celery(settings, max_connections=settings.web_worker_connections)
    messages = broker.make(settings, client, celery)
    return Services(
        settings=settings,
        redis=client,
        store=Store(
            client,
            settings.job_ttl_s,
            settings.max_followers,
            replication(settings),
            rates=Rates(client),
        ),
        listener=Listener(client),
        celery=celery,
        keys=KeyRing(settings.api_keys),
        local_cache=LocalCache(settings.cache_local_entries, settings.cache_local_ttl_s),
        admission=Admission(settings, client, messages),
        broker=messages,
        held=HeldCounts(settings.max_held_requests_per_key),
    )


def _check_redis(settings: Settings, svc: Services) -> None:
    try:
        topology.check_at_start(svc.redis, settings.redis_require_safe)
    except topology.UnsafeRedis:
        # gunicorn's "worker failed to boot" status: its master stops instead of respawning.
        raise SystemExit(3) from None


def drain(app: Flask, since: float) -> None:
    """The process is stopping since `since` (time.monotonic): long-polls answer now with the
    job as it is; held completions may finish within CHATQ_GRACEFUL_TIMEOUT of it."""
    svc: Services = app.extensions["chatq"]
    svc.listener.drain(hold_until=since + svc.settings.graceful_timeout_s)


def create_app(settings: Settings | None = None) -> Flask:
    """Build the app; `settings` default to the CHATQ_* environment."""
    settings = settings or config.load()
    runtime.setup(settings.log_level, settings.secret_values(), settings.log_format)
    app = _App(__name__)
    # Werkzeug answers `/v1/jobs//events` (an empty id) with a 308 to `/v1/jobs/events` and an
    # HTML body; every path of the API answers JSON, so such a path is a plain 404.
    app.url_map.merge_slashes = False
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.session_interface = _NoSessions()
    svc = _services(settings)
    _check_redis(settings, svc)
    app.extensions["chatq"] = svc
    metrics.install_request_log(app, settings.access_log)
    metrics.install(app, settings.metrics_dir)
    tracing.start("chatq-web")
    web_tracing.install(app)
    http.register(app, settings.backend_retry_after_s)
    jobs.register(app)
    chat.register(app)
    app.register_blueprint(responses.bp)
    pages.register(app)
    app.register_blueprint(webhooks.bp)
    batches.register(app)
    app.after_request(add_rate_headers)
    app.after_request(mark_unheld)
    app.after_request(svc.held.release_when_closed)
    return app
