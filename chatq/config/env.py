"""Reading CHATQ_* variables: the text of one variable as a parser sees it (`Reading`), one
parser per kind of value, and the parsers of the settings that hold lists (API keys,
Sentinels, URLs, overrides, lanes). The settings name their parsers where they are declared."""

from __future__ import annotations

import hashlib
import math
import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from chatq.words import PRIORITIES

T = TypeVar("T")

# The job lanes, most urgent first (chatq/admission/fairness.py, chatq/broker/celery_app.py): the
# priorities.
LANES = PRIORITIES


class ConfigError(ValueError):
    """A CHATQ_* variable holds a value that cannot be used."""


@dataclass(frozen=True)
class Reading:
    """One variable as its parser sees it: its name, its text (stripped, and not empty unless
    its setting keeps an empty value), the bounds its setting declares, and the settings read
    before it, by field name (for a value checked against another, such as a key name)."""

    name: str
    text: str
    minimum: float = 0
    maximum: float | None = None
    earlier: Mapping[str, object] = field(default_factory=dict)

    def key_names(self) -> set[str]:
        """The names of the keys of CHATQ_API_KEYS (read before every setting that names them)."""
        pairs = self.earlier["api_keys"]
        assert isinstance(pairs, tuple)
        return {name for name, _ in pairs}


def text(r: Reading) -> str:
    return r.text


def upper(r: Reading) -> str:
    return r.text.upper()


def whole(r: Reading) -> int:
    """A whole number within the setting's bounds."""
    try:
        value = int(r.text)
    except ValueError as exc:
        raise ConfigError(f"{r.name} must be a whole number, got {r.text!r}") from exc
    if value < r.minimum:
        raise ConfigError(f"{r.name} must be at least {r.minimum}, got {value}")
    if r.maximum is not None and value > r.maximum:
        raise ConfigError(f"{r.name} must be at most {r.maximum}")
    return value


def number(r: Reading) -> float:
    """A finite number at least the setting's minimum."""
    try:
        value = float(r.text)
    except ValueError as exc:
        raise ConfigError(f"{r.name} must be a number, got {r.text!r}") from exc
    if not math.isfinite(value) or value < r.minimum:
        least = float(r.minimum)
        raise ConfigError(f"{r.name} must be a finite number >= {least}, got {r.text!r}")
    return value


def flag(r: Reading) -> bool:
    """On or off: 1, true, yes, on or 0, false, no, off, in any case."""
    raw = r.text.lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{r.name} must be 1 or 0, got {raw!r}")


@dataclass(frozen=True)
class Choice:
    """A parser that takes one of `allowed`, as written (the table lists them)."""

    allowed: tuple[str, ...]

    def __call__(self, r: Reading) -> str:
        if r.text not in self.allowed:
            raise ConfigError(f"{r.name} must be one of {', '.join(self.allowed)}, got {r.text!r}")
        return r.text


def file_path(r: Reading) -> str:
    """The path of a file that exists."""
    if not os.path.isfile(r.text):
        raise ConfigError(f"{r.name}: no file at {r.text!r}")
    return r.text


def from_text(parse: Callable[[str], T]) -> Callable[[Reading], T]:
    """A parser of `parse`, which needs the text alone (its errors name the variable)."""
    return lambda r: parse(r.text)


def default_files_dir() -> str:
    """CHATQ_FILES_DIR's default: `chatq/files` in the user's data folder ($XDG_DATA_HOME,
    else ~/.local/share), which no other user can name in advance as in a shared /tmp."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "chatq", "files")


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
        port_number = int(port or SENTINEL_PORT)
        if not 0 < port_number < 65536:
            raise ConfigError(f"CHATQ_REDIS_SENTINELS: no port {port_number} (in {item!r})")
        found.append((host, port_number))
    return tuple(found)


AMQP_SCHEMES = ("amqp", "amqps")
BROKER_SCHEMES = ("redis", "rediss", *AMQP_SCHEMES)


def is_amqp(url: str) -> bool:
    """Whether `url` names RabbitMQ (amqp:// or amqps://)."""
    return urllib.parse.urlsplit(url).scheme.lower() in AMQP_SCHEMES


def read_broker_url(r: Reading) -> str:
    """CHATQ_BROKER_URL: a Redis or a RabbitMQ URL."""
    scheme, sep, _ = r.text.partition("://")
    if not sep or scheme.lower() not in BROKER_SCHEMES:
        # Only a well-formed scheme is repeated: the rest of a URL may hold a password.
        shown = repr(scheme) if sep and scheme.isalnum() else "no scheme"
        raise ConfigError(
            f"{r.name} must start with one of "
            f"{', '.join(s + '://' for s in BROKER_SCHEMES)}; got {shown}"
        )
    return r.text


def parse_lanes(raw: str) -> tuple[str, ...]:
    """CHATQ_WORKER_LANES: `interactive`, `batch` or both, comma-separated (empty: both)."""
    lanes = tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    wrong = [name for name in lanes if name not in LANES]
    if wrong:
        raise ConfigError(f"CHATQ_WORKER_LANES: no lane {wrong[0]!r} (lanes: {', '.join(LANES)})")
    return tuple(lane for lane in LANES if lane in lanes) or LANES
