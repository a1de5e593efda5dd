"""Every CHATQ_* setting, read once from the environment, with its default and unit."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from chatq import config_groups
from chatq.config_env import (
    LANES,
    default_files_dir,
    parse_overrides,
    parse_urls,
    read_bool,
    read_broker_url,
    read_choice,
    read_file_path,
    read_float,
    read_int,
    read_text,
)
from chatq.config_env import ConfigError as ConfigError  # what callers catch
from chatq.config_env import bare_key_name as bare_key_name
from chatq.config_env import parse_api_keys as parse_api_keys
from chatq.config_env import parse_sentinels as parse_sentinels
from chatq.limits_config import NO_LIMITS, KeyLimits
from chatq.webhooks_config import WebhookConfig


@dataclass(frozen=True)
class Settings:
    """The whole configuration of a chatq process; see the README for each field."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    state_url: str = ""
    redis_ca_file: str = ""
    redis_require_safe: bool = False
    redis_sentinels: tuple[tuple[str, int], ...] = ()
    redis_master_name: str = "mymaster"
    redis_sentinel_password: str = ""
    redis_min_replicas: int = 0
    redis_wait_timeout_ms: int = 500
    broker_url: str = ""
    broker_api_url: str = ""
    bind: str = "127.0.0.1:8000"
    web_workers: int = 1
    web_worker_connections: int = 12000
    max_held_requests_per_key: int = 1000
    worker_concurrency: int = 100
    worker_pool: str = "gevent"
    worker_lanes: tuple[str, ...] = LANES
    worker_metrics_bind: str = "127.0.0.1:9101"
    api_keys: tuple[tuple[str, str], ...] = ()
    admin_key_names: tuple[str, ...] = ()
    upstream_urls: tuple[str, ...] = ("http://127.0.0.1:9100/v1",)
    upstream_api_key: str = ""
    upstream_ca_file: str = ""
    default_model: str = "gpt-4o-mini"
    max_body_bytes: int = 1024 * 1024
    max_wait_s: float = 55.0
    result_wait_s: float = 25.0
    job_ttl_s: int = 86400
    job_timeout_s: float = 600.0
    lease_s: float = 10.0
    max_takeovers: int = 3
    queue_resend_s: float = 300.0
    connect_timeout_s: float = 5.0
    first_byte_timeout_s: float = 60.0
    read_timeout_s: float = 30.0
    cooldown_s: float = 30.0
    cooldown_after_failures: int = 3
    upstream_pacing: bool = True
    upstream_rpm: int = 0
    upstream_tpm: int = 0
    max_attempts: int = 4
    retry_base_s: float = 0.5
    retry_after_max_s: float = 30.0
    flush_interval_s: float = 0.025
    flush_max_chars: int = 4096
    backend_retry_after_s: int = 2
    log_level: str = "INFO"
    log_format: str = "text"
    access_log: bool = True
    metrics_dir: str = ""
    metrics_token: str = ""
    max_queue_depth: int = 10000
    rate_limit: str = ""
    rate_limit_overrides: tuple[tuple[str, str], ...] = ()
    keepalive_s: int = 75
    header_timeout_s: float = 10.0
    cancel_on_disconnect: bool = False
    sse_keepalive_s: float = 15.0
    graceful_timeout_s: int = 30
    cache_ttl_s: int = 3600
    max_context_tokens: int = 0
    context_overflow: str = "reject"
    cache_shared: bool = False
    cache_local_entries: int = 1000
    cache_local_ttl_s: float = 60.0
    max_followers: int = 100
    max_n: int = 8
    max_output_tokens: int = 0
    webhooks: tuple[WebhookConfig, ...] = ()
    webhook_allow_private: bool = False
    webhook_timeout_s: float = 15.0
    webhook_concurrency: int = 50
    webhook_endpoint_concurrency: int = 10
    webhook_key_concurrency: int = 20
    webhook_retry_scale: float = 1.0
    webhook_log_ttl_s: int = 604800
    files_dir: str = field(default_factory=default_files_dir)
    files_max_bytes: int = 200 * 1024 * 1024
    files_max_lines: int = 50000
    files_ttl_s: int = 30 * 86400
    files_max_bytes_per_key: int = 10 * 1024**3
    files_max_count_per_key: int = 1000
    batch_max_queued: int = 80
    batch_max_active_per_key: int = 100
    batch_window_s: float = 86400.0
    key_limits: KeyLimits = NO_LIMITS
    key_limit_overrides: tuple[tuple[str, KeyLimits], ...] = ()
    default_output_budget: int = 1024
    fair_dispatch: bool = True
    tenant_weights: tuple[tuple[str, int], ...] = ()
    tenant_max_running: int = 0
    tenant_max_running_overrides: tuple[tuple[str, int], ...] = ()

    def secret_values(self) -> list[str]:
        """Every secret of this configuration (the values of the fields a repr masks): what
        the logs and the errors told to clients redact."""
        found: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if _is_secret(f.name, value):
                for item in value if isinstance(value, tuple) else (value,):
                    found.append(item[1] if isinstance(item, tuple) else item)
        return [v for v in found if v]

    def __repr__(self) -> str:
        """Every field, with keys masked and URL passwords hidden: safe to log or print."""
        shown = ", ".join(
            f"{f.name}={_masked(f.name, getattr(self, f.name))!r}" for f in fields(self)
        )
        return f"Settings({shown})"


# A field whose name ends so holds secrets (api_keys, upstream_api_key, metrics_token, a
# future webhook_secret): a repr never shows its values. A number is no secret, whatever its
# name says (max_held_requests_per_key).
SECRET_SUFFIXES = ("_key", "_keys", "_secret", "_secrets", "_password", "_token")


def _is_secret(name: str, value: object) -> bool:
    return name.endswith(SECRET_SUFFIXES) and not isinstance(value, int | float)


MASK = "***"
_URL_PASSWORD = re.compile(r"(?<=://)([^/@:\s]*):[^/@\s]*@")


def _masked(name: str, value: object) -> object:
    """`value` as a repr may show it: secrets masked, a password in a URL replaced."""
    if _is_secret(name, value):
        if isinstance(value, tuple):  # (name, key) pairs keep their names
            return tuple((p[0], MASK) if isinstance(p, tuple) else MASK for p in value)
        return MASK if value else value
    if isinstance(value, str):
        return _URL_PASSWORD.sub(rf"\1:{MASK}@", value)
    if isinstance(value, tuple):
        return tuple(_masked(name, item) for item in value)
    return value


def load(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from `env` (default: os.environ)."""
    e = os.environ if env is None else env
    d = Settings()
    broker_url = read_broker_url(e)
    return Settings(
        redis_url=read_text(e, "CHATQ_REDIS_URL", d.redis_url),
        state_url=e.get("CHATQ_STATE_URL", "").strip(),
        redis_ca_file=read_file_path(e, "CHATQ_REDIS_CA_FILE"),
        redis_require_safe=read_bool(e, "CHATQ_REDIS_REQUIRE_SAFE", d.redis_require_safe),
        **config_groups.sentinel_settings(e, d),
        broker_url=broker_url,
        broker_api_url=read_text(e, "CHATQ_BROKER_API_URL", d.broker_api_url),
        bind=read_text(e, "CHATQ_BIND", d.bind),
        web_workers=read_int(e, "CHATQ_WEB_WORKERS", d.web_workers, 1),
        web_worker_connections=read_int(
            e, "CHATQ_WEB_WORKER_CONNECTIONS", d.web_worker_connections, 1
        ),
        max_held_requests_per_key=read_int(
            e, "CHATQ_MAX_HELD_REQUESTS_PER_KEY", d.max_held_requests_per_key
        ),
        worker_concurrency=read_int(e, "CHATQ_WORKER_CONCURRENCY", d.worker_concurrency, 1),
        worker_metrics_bind=e.get("CHATQ_WORKER_METRICS_BIND", d.worker_metrics_bind).strip(),
        worker_pool=read_choice(e, "CHATQ_WORKER_POOL", d.worker_pool, ("gevent", "threads")),
        worker_lanes=config_groups.worker_lanes(e, broker_url),
        api_keys=parse_api_keys(e.get("CHATQ_API_KEYS", "")),
        admin_key_names=config_groups.admin_key_names(e),
        upstream_urls=parse_urls(e.get("CHATQ_UPSTREAM_URLS", ""), d.upstream_urls),
        upstream_api_key=e.get("CHATQ_UPSTREAM_API_KEY", "").strip(),
        upstream_ca_file=read_file_path(e, "CHATQ_UPSTREAM_CA_FILE"),
        default_model=read_text(e, "CHATQ_DEFAULT_MODEL", d.default_model),
        max_body_bytes=read_int(e, "CHATQ_MAX_BODY_BYTES", d.max_body_bytes, 1),
        max_wait_s=read_float(e, "CHATQ_MAX_WAIT", d.max_wait_s),
        result_wait_s=read_float(e, "CHATQ_RESULT_WAIT", d.result_wait_s),
        job_ttl_s=read_int(e, "CHATQ_JOB_TTL", d.job_ttl_s, 1),
        job_timeout_s=read_float(e, "CHATQ_JOB_TIMEOUT", d.job_timeout_s, 0.1),
        lease_s=read_float(e, "CHATQ_LEASE", d.lease_s, 0.5),
        max_takeovers=read_int(e, "CHATQ_MAX_TAKEOVERS", d.max_takeovers),
        queue_resend_s=read_float(e, "CHATQ_QUEUE_RESEND", d.queue_resend_s, 1.0),
        connect_timeout_s=read_float(
            e, "CHATQ_UPSTREAM_CONNECT_TIMEOUT", d.connect_timeout_s, 0.01
        ),
        first_byte_timeout_s=read_float(
            e, "CHATQ_UPSTREAM_FIRST_BYTE_TIMEOUT", d.first_byte_timeout_s, 0.01
        ),
        read_timeout_s=read_float(e, "CHATQ_UPSTREAM_READ_TIMEOUT", d.read_timeout_s, 0.01),
        cooldown_s=read_float(e, "CHATQ_UPSTREAM_COOLDOWN", d.cooldown_s, 0.1),
        cooldown_after_failures=read_int(
            e, "CHATQ_UPSTREAM_COOLDOWN_AFTER", d.cooldown_after_failures, 1
        ),
        upstream_pacing=read_bool(e, "CHATQ_UPSTREAM_PACING", d.upstream_pacing),
        upstream_rpm=read_int(e, "CHATQ_UPSTREAM_RPM", d.upstream_rpm),
        upstream_tpm=read_int(e, "CHATQ_UPSTREAM_TPM", d.upstream_tpm),
        max_attempts=read_int(e, "CHATQ_UPSTREAM_MAX_ATTEMPTS", d.max_attempts, 1),
        retry_base_s=read_float(e, "CHATQ_RETRY_BASE", d.retry_base_s),
        retry_after_max_s=read_float(e, "CHATQ_RETRY_AFTER_MAX", d.retry_after_max_s),
        flush_interval_s=read_float(e, "CHATQ_FLUSH_INTERVAL", d.flush_interval_s),
        flush_max_chars=read_int(e, "CHATQ_FLUSH_MAX_CHARS", d.flush_max_chars, 1),
        backend_retry_after_s=read_int(e, "CHATQ_BACKEND_RETRY_AFTER", d.backend_retry_after_s, 1),
        log_level=read_text(e, "CHATQ_LOG_LEVEL", d.log_level).upper(),
        log_format=read_choice(e, "CHATQ_LOG_FORMAT", d.log_format, ("text", "json")),
        access_log=read_bool(e, "CHATQ_ACCESS_LOG", d.access_log),
        metrics_dir=e.get("CHATQ_METRICS_DIR", "").strip(),
        metrics_token=e.get("CHATQ_METRICS_TOKEN", "").strip(),
        max_queue_depth=read_int(e, "CHATQ_MAX_QUEUE_DEPTH", d.max_queue_depth),
        rate_limit=e.get("CHATQ_RATE_LIMIT", "").strip(),
        rate_limit_overrides=parse_overrides(e.get("CHATQ_RATE_LIMIT_OVERRIDES", "")),
        keepalive_s=read_int(e, "CHATQ_KEEPALIVE", d.keepalive_s, 1),
        header_timeout_s=read_float(e, "CHATQ_HEADER_TIMEOUT", d.header_timeout_s, 0.1),
        sse_keepalive_s=read_float(e, "CHATQ_SSE_KEEPALIVE", d.sse_keepalive_s, 0.1),
        cancel_on_disconnect=read_bool(e, "CHATQ_CANCEL_ON_DISCONNECT", d.cancel_on_disconnect),
        graceful_timeout_s=read_int(e, "CHATQ_GRACEFUL_TIMEOUT", d.graceful_timeout_s, 1),
        cache_ttl_s=read_int(e, "CHATQ_CACHE_TTL", d.cache_ttl_s),
        max_context_tokens=read_int(e, "CHATQ_MAX_CONTEXT_TOKENS", d.max_context_tokens),
        context_overflow=read_choice(
            e, "CHATQ_CONTEXT_OVERFLOW", d.context_overflow, ("reject", "truncate_oldest")
        ),
        cache_shared=read_bool(e, "CHATQ_CACHE_SHARED", d.cache_shared),
        cache_local_entries=read_int(e, "CHATQ_CACHE_LOCAL_ENTRIES", d.cache_local_entries),
        cache_local_ttl_s=read_float(e, "CHATQ_CACHE_LOCAL_TTL", d.cache_local_ttl_s),
        max_followers=read_int(e, "CHATQ_MAX_FOLLOWERS", d.max_followers),
        max_n=read_int(e, "CHATQ_MAX_N", d.max_n),
        max_output_tokens=read_int(e, "CHATQ_MAX_OUTPUT_TOKENS", d.max_output_tokens),
        **config_groups.webhook_settings(e, d),
        files_dir=read_text(e, "CHATQ_FILES_DIR", d.files_dir),
        files_max_bytes=read_int(e, "CHATQ_FILES_MAX_BYTES", d.files_max_bytes, 1),
        files_max_lines=read_int(e, "CHATQ_FILES_MAX_LINES", d.files_max_lines, 1),
        files_ttl_s=read_int(e, "CHATQ_FILES_TTL", d.files_ttl_s, 1),
        files_max_bytes_per_key=read_int(
            e, "CHATQ_FILES_MAX_BYTES_PER_KEY", d.files_max_bytes_per_key, 1
        ),
        files_max_count_per_key=read_int(
            e, "CHATQ_FILES_MAX_COUNT_PER_KEY", d.files_max_count_per_key, 1
        ),
        batch_max_queued=read_int(e, "CHATQ_BATCH_MAX_QUEUED", d.batch_max_queued, 1),
        batch_max_active_per_key=read_int(
            e, "CHATQ_BATCH_MAX_ACTIVE_PER_KEY", d.batch_max_active_per_key, 1
        ),
        batch_window_s=read_float(e, "CHATQ_BATCH_WINDOW", d.batch_window_s, 0.1),
        **config_groups.limit_settings(e, d),
        **config_groups.fair_settings(e),
    )
