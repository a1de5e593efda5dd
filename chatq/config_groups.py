"""The CHATQ_* settings read as groups (Sentinel, fair dispatch, webhooks, per-key limits),
each checked as a whole; chatq/config.py puts them into Settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from chatq.config_env import (
    LANES,
    ConfigError,
    is_amqp,
    parse_api_keys,
    parse_lanes,
    parse_sentinels,
    read_bool,
    read_float,
    read_int,
    read_text,
)
from chatq.fair_config import parse_counts
from chatq.limits_config import KeyLimits, parse_key_limits
from chatq.webhooks_config import WebhookConfig, parse_webhooks

if TYPE_CHECKING:
    from chatq.config import Settings


def worker_lanes(e: Mapping[str, str], broker_url: str) -> tuple[str, ...]:
    """The lanes this worker runs; a lane of its own needs the Redis broker (on RabbitMQ both
    lanes are priorities of one queue, which a consumer cannot split)."""
    lanes = parse_lanes(e.get("CHATQ_WORKER_LANES", ""))
    if lanes != LANES and is_amqp(broker_url):
        raise ConfigError("CHATQ_WORKER_LANES needs the Redis broker (RabbitMQ: both lanes)")
    return lanes


def admin_key_names(e: Mapping[str, str]) -> tuple[str, ...]:
    """CHATQ_ADMIN_KEYS: names of keys of CHATQ_API_KEYS that see the whole of /v1/queue."""
    names = {name for name, _ in parse_api_keys(e.get("CHATQ_API_KEYS", ""))}
    admins = tuple(dict.fromkeys(n.strip() for n in e.get("CHATQ_ADMIN_KEYS", "").split(",")))
    admins = tuple(name for name in admins if name)
    if any(name not in names for name in admins):
        # Not repeated: a key put here by mistake would be printed.
        raise ConfigError(
            "CHATQ_ADMIN_KEYS takes names of keys of CHATQ_API_KEYS (`name` of `name:key`), "
            "and one of them is not"
        )
    return admins


def sentinel_settings(e: Mapping[str, str], d: Settings) -> dict[str, Any]:
    """The Redis behind Sentinel (CHATQ_REDIS_SENTINELS …) and the replicas a write waits for."""
    return {
        "redis_sentinels": parse_sentinels(e.get("CHATQ_REDIS_SENTINELS", "")),
        "redis_master_name": read_text(e, "CHATQ_REDIS_MASTER_NAME", d.redis_master_name),
        "redis_sentinel_password": e.get("CHATQ_REDIS_SENTINEL_PASSWORD", "").strip(),
        "redis_min_replicas": read_int(e, "CHATQ_REDIS_MIN_REPLICAS", d.redis_min_replicas),
        "redis_wait_timeout_ms": _wait_timeout_ms(e, d.redis_wait_timeout_ms),
    }


# WAIT blocks the connection: it must end well before a Redis reply times out (5 s).
MAX_WAIT_TIMEOUT_MS = 4000


def _wait_timeout_ms(e: Mapping[str, str], default: int) -> int:
    value = read_int(e, "CHATQ_REDIS_WAIT_TIMEOUT_MS", default, 1)
    if value > MAX_WAIT_TIMEOUT_MS:
        raise ConfigError(f"CHATQ_REDIS_WAIT_TIMEOUT_MS must be at most {MAX_WAIT_TIMEOUT_MS}")
    return value


def fair_settings(e: Mapping[str, str]) -> dict[str, Any]:
    """Fair dispatch across tenants: on or off, weights and running caps per key name."""
    names = {name for name, _ in parse_api_keys(e.get("CHATQ_API_KEYS", ""))}
    weights = e.get("CHATQ_TENANT_WEIGHTS", "")
    overrides = e.get("CHATQ_TENANT_MAX_RUNNING_OVERRIDES", "")
    try:
        return {
            "fair_dispatch": read_bool(e, "CHATQ_FAIR_DISPATCH", True),
            "tenant_weights": parse_counts("CHATQ_TENANT_WEIGHTS", weights, ":", ",", names, 1),
            "tenant_max_running": read_int(e, "CHATQ_TENANT_MAX_RUNNING", 0),
            "tenant_max_running_overrides": parse_counts(
                "CHATQ_TENANT_MAX_RUNNING_OVERRIDES", overrides, "=", None, names, 0
            ),
        }
    except ValueError as exc:  # its message names the variable
        raise ConfigError(str(exc)) from None


def _webhooks(raw: str, owners: set[str]) -> tuple[WebhookConfig, ...]:
    try:
        return parse_webhooks(raw, owners)
    except ValueError as exc:  # its message names the entry, never its secret
        raise ConfigError(f"CHATQ_WEBHOOKS: {exc}") from None


def webhook_settings(e: Mapping[str, str], d: Settings) -> dict[str, Any]:
    """The CHATQ_WEBHOOK* settings (endpoints from configuration, delivery knobs)."""
    owners = {name for name, _ in parse_api_keys(e.get("CHATQ_API_KEYS", ""))}
    return {
        "webhooks": _webhooks(e.get("CHATQ_WEBHOOKS", ""), owners),
        "webhook_allow_private": read_bool(
            e, "CHATQ_WEBHOOK_ALLOW_PRIVATE", d.webhook_allow_private
        ),
        "webhook_timeout_s": read_float(e, "CHATQ_WEBHOOK_TIMEOUT", d.webhook_timeout_s, 0.1),
        "webhook_concurrency": read_int(e, "CHATQ_WEBHOOK_CONCURRENCY", d.webhook_concurrency),
        "webhook_endpoint_concurrency": read_int(
            e, "CHATQ_WEBHOOK_ENDPOINT_CONCURRENCY", d.webhook_endpoint_concurrency, 1
        ),
        "webhook_key_concurrency": read_int(
            e, "CHATQ_WEBHOOK_KEY_CONCURRENCY", d.webhook_key_concurrency, 1
        ),
        "webhook_retry_scale": read_float(e, "CHATQ_WEBHOOK_RETRY_SCALE", d.webhook_retry_scale),
        "webhook_log_ttl_s": read_int(e, "CHATQ_WEBHOOK_LOG_TTL", d.webhook_log_ttl_s, 86400),
    }


def limit_settings(e: Mapping[str, str], d: Settings) -> dict[str, Any]:
    """The per-key limits and budgets (CHATQ_KEY_*), and the output a request reserves."""
    default = KeyLimits(
        requests_per_minute=read_int(e, "CHATQ_KEY_RPM", 0),
        tokens_per_minute=read_int(e, "CHATQ_KEY_TPM", 0),
        tokens_per_day=read_int(e, "CHATQ_KEY_TOKENS_PER_DAY", 0),
        tokens_per_month=read_int(e, "CHATQ_KEY_TOKENS_PER_MONTH", 0),
    )
    names = {name for name, _ in parse_api_keys(e.get("CHATQ_API_KEYS", ""))}
    try:
        overrides = parse_key_limits(e.get("CHATQ_KEY_LIMITS", ""), default, names)
    except ValueError as exc:
        raise ConfigError(f"CHATQ_KEY_LIMITS: {exc}") from None
    return {
        "key_limits": default,
        "key_limit_overrides": overrides,
        "default_output_budget": read_int(
            e, "CHATQ_DEFAULT_OUTPUT_BUDGET", d.default_output_budget, 1
        ),
    }
