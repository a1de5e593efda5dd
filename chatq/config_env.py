"""Reading CHATQ_* variables: one typed reader per kind of value, and the parsers of the
settings that hold lists (API keys, Sentinels, URLs, overrides); chatq/config.py uses them."""

from __future__ import annotations

import hashlib
import math
import os
import urllib.parse
from collections.abc import Mapping

from chatq.jobs import PRIORITIES

# The job lanes, most urgent first (chatq/fair.py, chatq/celery_app.py): the priorities.
LANES = PRIORITIES


class ConfigError(ValueError):
    """A CHATQ_* variable holds a value that cannot be used."""


def default_files_dir() -> str:
    """CHATQ_FILES_DIR's default: `chatq/files` in the user's data folder ($XDG_DATA_HOME,
    else ~/.local/share), which no other user can name in advance as in a shared /tmp."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "chatq", "files")


def read_text(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(name, "").strip() or default


def read_int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from exc
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def read_float(env: Mapping[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"{name} must be a finite number >= {minimum}, got {raw!r}")
    return value


def read_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be 1 or 0, got {raw!r}")


def read_choice(env: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = read_text(env, name, default)
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def parse_overrides(raw: str) -> tuple[tuple[str, str], ...]:
    """`name=10/second name2=100/minute;1000/hour` into (name, limit) pairs."""
    pairs = []
    for item in raw.split():
        name, sep, limit = item.partition("=")
        if not sep or not name or not limit:
            raise ConfigError("CHATQ_RATE_LIMIT_OVERRIDES entries must be `name=limit`")
        pairs.append((name, limit))
    return tuple(pairs)


def bare_key_name(key: str) -> str:
    """The name of a key given without one: `key-` and 12 hex digits of its SHA-256."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def parse_api_keys(raw: str) -> tuple[tuple[str, str], ...]:
    """Parse `name:key,key2` into (name, key) pairs; a bare key is named by its hash."""
    pairs: list[tuple[str, str]] = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, key = item.partition(":")
        # A bare key must not be its own name: names go into logs, job records and Redis keys.
        pairs.append((name.strip(), key.strip()) if sep else (bare_key_name(item), item))
    for name, key in pairs:
        if not name or not key:
            raise ConfigError("CHATQ_API_KEYS entries must be `name:key` or `key`")
    return tuple(pairs)


def parse_urls(raw: str, default: tuple[str, ...]) -> tuple[str, ...]:
    urls = tuple(u.strip().rstrip("/") for u in raw.split(",") if u.strip())
    return urls or default


SENTINEL_PORT = 26379


def parse_sentinels(raw: str) -> tuple[tuple[str, int], ...]:
    """`host:port,host2:port` (`[v6]:port`; the port defaults to 26379) into pairs."""
    found = []
    for item in (i.strip() for i in raw.split(",")):
        if not item:
            continue
        if item.startswith("["):
            host, closed, rest = item[1:].partition("]")
            port = rest.removeprefix(":") if closed else "?"
        else:
            host, _, port = item.partition(":")
        if not host or not (port or str(SENTINEL_PORT)).isdigit():
            raise ConfigError(f"CHATQ_REDIS_SENTINELS entries must be host:port, got {item!r}")
        number = int(port or SENTINEL_PORT)
        if not 0 < number < 65536:
            raise ConfigError(f"CHATQ_REDIS_SENTINELS: no port {number} (in {item!r})")
        found.append((host, number))
    return tuple(found)


AMQP_SCHEMES = ("amqp", "amqps")
BROKER_SCHEMES = ("redis", "rediss", *AMQP_SCHEMES)


def is_amqp(url: str) -> bool:
    """Whether `url` names RabbitMQ (amqp:// or amqps://)."""
    return urllib.parse.urlsplit(url).scheme.lower() in AMQP_SCHEMES


def read_broker_url(env: Mapping[str, str]) -> str:
    """CHATQ_BROKER_URL: a Redis or a RabbitMQ URL; empty means the Redis URL."""
    url = env.get("CHATQ_BROKER_URL", "").strip()
    scheme, sep, _ = url.partition("://")
    if url and (not sep or scheme.lower() not in BROKER_SCHEMES):
        # Only a well-formed scheme is repeated: the rest of a URL may hold a password.
        shown = repr(scheme) if sep and scheme.isalnum() else "no scheme"
        raise ConfigError(
            f"CHATQ_BROKER_URL must start with one of "
            f"{', '.join(s + '://' for s in BROKER_SCHEMES)}; got {shown}"
        )
    return url


def read_file_path(env: Mapping[str, str], name: str) -> str:
    path = env.get(name, "").strip()
    if path and not os.path.isfile(path):
        raise ConfigError(f"{name}: no file at {path!r}")
    return path


def parse_lanes(raw: str) -> tuple[str, ...]:
    """CHATQ_WORKER_LANES: `interactive`, `batch` or both, comma-separated (empty: both)."""
    lanes = tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    wrong = [name for name in lanes if name not in LANES]
    if wrong:
        raise ConfigError(f"CHATQ_WORKER_LANES: no lane {wrong[0]!r} (lanes: {', '.join(LANES)})")
    return tuple(lane for lane in LANES if lane in lanes) or LANES
