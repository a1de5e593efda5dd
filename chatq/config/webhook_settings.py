"""The settings of webhooks (CHATQ_WEBHOOK*): the endpoints given in CHATQ_WEBHOOKS and the
delivery knobs; and the rules every endpoint's URL and secret follow, with the address a host
writes out (shared by the settings, the API, the worker and chatq/webhooks/addresses.py)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import idna
from urllib3.util import parse_url

from chatq.config.env import ConfigError, Reading, flag, number, whole
from chatq.config.fields import setting

SECRET_PREFIX = "whsec_"
# Standard Webhooks: secrets of 24 to 64 random bytes.
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
MAX_URL_CHARS = 2048
# A host name's limits in DNS (RFC 1035), which the `idna` package enforces.
MAX_LABEL_CHARS = 63
MAX_NAME_CHARS = 253
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# How a URL's host that ends in a number is read: as an IPv4 address (the WHATWG URL
# standard), as the resolver reads it (`127.1`, `0x7f.1`, `2130706433`).
ENDS_IN_NUMBER = re.compile(r"(?:^|\.)(?:[0-9]+|0[xX][0-9a-fA-F]*)\.?$")


@dataclass(frozen=True)
class WebhookConfig:
    """One endpoint of CHATQ_WEBHOOKS: the key name it serves, its URL and signing secrets
    (the first is the newest; all sign while a secret rotates)."""

    owner: str
    url: str
    secrets: tuple[str, ...]

    @property
    def endpoint_id(self) -> str:
        """A stable id, the same in every process: `wh_` and a hash of owner and URL."""
        return config_endpoint_id(self.owner, self.url)

    def __repr__(self) -> str:
        """Without the secrets: safe to log."""
        return f"WebhookConfig(owner={self.owner!r}, url={self.url!r}, secrets=***)"


def literal_address(host: str) -> IPAddress | None:
    """The address `host` (a URL's host as urlsplit reads it) writes out, read as the
    resolver reads it; None for a name. ValueError when it looks like an address but is none
    (a host ending in a number, or with a colon)."""
    if ":" in host:
        return ipaddress.IPv6Address(host.split("%", 1)[0])
    if not ENDS_IN_NUMBER.search(host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        raise ValueError(f"{host[:80]!r} is not an IPv4 address") from None


def config_endpoint_id(owner: str, url: str) -> str:
    """The id of the configured endpoint of `owner` at `url`."""
    return "wh_" + hashlib.sha256(f"{owner}\0{url}".encode()).hexdigest()[:24]


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a webhook destination, or None (addresses are checked when
    connecting, see chatq/webhooks/net.py)."""
    if len(url) > MAX_URL_CHARS:
        return f"a URL of at most {MAX_URL_CHARS} characters is needed"
    if not url.isprintable() or any(c.isspace() for c in url):
        # A lone surrogate would fail every delivery outside requests' exceptions.
        return "a URL has no whitespace, control characters or lone surrogates"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in range
        # As a delivery's requests reads it: urlsplit takes netlocs it cannot (`][::`).
        parse_url(url)
    except ValueError:  # urllib3's LocationParseError is one
        return "not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an http:// or https:// URL with a host is needed"
    if problem := host_problem(parts.hostname):
        return problem
    if parts.username is not None or parts.password is not None:
        return "a URL must not carry credentials"
    if parts.fragment:
        return "a URL must not have a #fragment"
    return None


def host_problem(host: str) -> str | None:
    """Why `host` (as urlsplit reads a URL's, lowercased) is neither an IP address nor a
    domain name a delivery can resolve, or None. A name is encoded with the `idna` package
    (IDNA 2008) as a delivery encodes it: by requests with the UTS #46 mapping, and a
    non-ASCII one first by urllib3 without it; either also holds each label to 63 characters
    and the name to 253. The standard library's codec (IDNA 2003) takes names they do not."""
    try:
        if literal_address(host) is not None:
            return None
    except ValueError:
        return "the host is neither an IP address nor a domain name"
    try:
        idna.encode(host, uts46=True)
        if not host.isascii():
            idna.encode(host, strict=True, std3_rules=True)
    except idna.IDNAError as exc:
        return (
            f"the host is not a valid domain name ({exc}): IDNA, each label between dots "
            f"1 to {MAX_LABEL_CHARS} characters, the whole name at most {MAX_NAME_CHARS}"
        )
    return None


def secret_problem(secret: str) -> str | None:
    """Why `secret` is not a usable Standard Webhooks secret, or None; never quotes it."""
    if not secret.startswith(SECRET_PREFIX):
        return f"a secret starts with {SECRET_PREFIX}"
    try:
        raw = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        return f"a secret is {SECRET_PREFIX} and base64"
    if not MIN_SECRET_BYTES <= len(raw) <= MAX_SECRET_BYTES:
        return f"a secret holds {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes"
    return None


def _entry(item: str, number: int, owners: set[str]) -> WebhookConfig:
    owner, sep, rest = item.partition("=")
    url, _, secrets_text = rest.partition("#")
    secrets = tuple(s for s in secrets_text.split("#") if s)
    where = f"entry {number}"
    if not sep or not owner or not url or not secrets:
        raise ValueError(f"{where}: entries are `name=URL#whsec_…` (more `#whsec_…` to rotate)")
    if owners and owner not in owners:
        raise ValueError(f"{where}: {owner!r} is not a key name of CHATQ_API_KEYS")
    problem = url_problem(url) or next(filter(None, map(secret_problem, secrets)), None)
    if problem:
        raise ValueError(f"{where}: {problem}")
    return WebhookConfig(owner, url, secrets)


def parse_webhooks(raw: str, owners: set[str]) -> tuple[WebhookConfig, ...]:
    """Parse `name=URL#whsec_… name2=URL2#whsec_new#whsec_old` (whitespace-separated)."""
    endpoints = tuple(_entry(item, n, owners) for n, item in enumerate(raw.split(), 1))
    ids = [e.endpoint_id for e in endpoints]
    if len(set(ids)) != len(ids):
        raise ValueError("the same key name and URL are given twice")
    return endpoints


def read_webhooks(r: Reading) -> tuple[WebhookConfig, ...]:
    try:
        return parse_webhooks(r.text, r.key_names())
    except ValueError as exc:  # its message names the entry, never its secret
        raise ConfigError(f"{r.name}: {exc}") from None


@dataclass(frozen=True, repr=False)
class WebhookSettings:
    """Webhook endpoints from configuration, and how deliveries go."""

    webhooks: tuple[WebhookConfig, ...] = setting(
        "CHATQ_WEBHOOKS",
        (),
        read_webhooks,
        unit="`name=URL#whsec_…`, whitespace-separated",
        doc=(
            "webhook endpoints from configuration, per key name; more `#whsec_…` sign beside the "
            "first while a secret rotates (see [Webhooks](#webhooks))"
        ),
    )

    webhook_allow_private: bool = setting(
        "CHATQ_WEBHOOK_ALLOW_PRIVATE",
        False,
        flag,
        doc=(
            "let webhooks reach addresses that are not globally routable (loopback, private, "
            "link-local, reserved, and their IPv6 forms; see [Webhooks](#webhooks)) (`make up` "
            "and the tests set it)"
        ),
    )

    webhook_timeout_s: float = setting(
        "CHATQ_WEBHOOK_TIMEOUT",
        15.0,
        number,
        unit="s",
        minimum=0.1,
        doc=(
            "the deadline of one delivery attempt, all of it: connect, send, and the answer's "
            "status and headers; a receiver that trickles its answer is cut there (outcome "
            "`timeout`)"
        ),
    )

    webhook_concurrency: int = setting(
        "CHATQ_WEBHOOK_CONCURRENCY",
        50,
        whole,
        unit="attempts, per worker process",
        doc=(
            "delivery slots of each worker process, apart from its job slots (a delivery never "
            "takes a job's slot); `0`: this worker sends no webhooks"
        ),
    )

    webhook_endpoint_concurrency: int = setting(
        "CHATQ_WEBHOOK_ENDPOINT_CONCURRENCY",
        10,
        whole,
        unit="attempts, per endpoint",
        minimum=1,
        doc=(
            "most attempts running at once to one endpoint, across all workers (counted in "
            "Redis); the endpoint's other due deliveries wait, first come first, for one of them "
            "to end"
        ),
    )

    webhook_key_concurrency: int = setting(
        "CHATQ_WEBHOOK_KEY_CONCURRENCY",
        20,
        whole,
        unit="attempts, per key name",
        minimum=1,
        doc=(
            "most attempts running at once to all the endpoints of one key name, across all "
            "workers (counted in Redis); the key's other due deliveries wait, first come first, "
            "for one of them to end, out of other keys' way (see [Webhooks](#webhooks))"
        ),
    )

    webhook_retry_scale: float = setting(
        "CHATQ_WEBHOOK_RETRY_SCALE",
        1.0,
        number,
        unit="factor",
        doc="multiplies the retry schedule (5 s … 24 h); the tests compress it with `0.001`",
    )

    webhook_log_ttl_s: int = setting(
        "CHATQ_WEBHOOK_LOG_TTL",
        604800,
        whole,
        unit="s",
        minimum=86400,
        doc="a delivery and its attempts stay in the log this long after its last attempt",
    )
