"""The settings of the web: its clients' keys, how it listens, and how long it holds a
request."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config.env import (
    ConfigError,
    Reading,
    flag,
    from_text,
    number,
    parse_api_keys,
    text,
    whole,
)
from chatq.config.fields import setting


def read_admin_keys(r: Reading) -> tuple[str, ...]:
    """CHATQ_ADMIN_KEYS: names of keys of CHATQ_API_KEYS that see the whole of /v1/queue."""
    admins = tuple(dict.fromkeys(n.strip() for n in r.text.split(",")))
    admins = tuple(name for name in admins if name)
    if any(name not in r.key_names() for name in admins):
        # Not repeated: a key put here by mistake would be printed.
        raise ConfigError(
            f"{r.name} takes names of keys of CHATQ_API_KEYS (`name` of `name:key`), "
            "and one of them is not"
        )
    return admins


@dataclass(frozen=True, repr=False)
class WebSettings:
    """The web process and its clients."""

    api_keys: tuple[tuple[str, str], ...] = setting(
        "CHATQ_API_KEYS",
        (),
        from_text(parse_api_keys),
        unit="`name:key,…`",
        note="every `/v1` call is 401",
        doc=(
            "client keys; a bare `key` is named `key-` + the first 12 hex digits of its SHA-256 "
            "(the name, never the key, is what logs, jobs and Redis show); kept hashed in memory"
        ),
    )

    admin_key_names: tuple[str, ...] = setting(
        "CHATQ_ADMIN_KEYS",
        (),
        read_admin_keys,
        unit="key names, comma-separated",
        note="none",
        doc=(
            "the keys (by their names in `CHATQ_API_KEYS`) that `GET /v1/queue` shows the whole "
            "picture; every other key sees its own share and totals that name no key. An admin "
            "key is an ordinary key in everything else (its jobs, limits, fair share)"
        ),
    )

    bind: str = setting(
        "CHATQ_BIND",
        "127.0.0.1:8000",
        text,
        unit="host:port",
        doc="where `python -m web` listens",
    )

    web_workers: int = setting(
        "CHATQ_WEB_WORKERS",
        1,
        whole,
        unit="processes",
        minimum=1,
        doc="gunicorn worker processes",
    )

    web_worker_connections: int = setting(
        "CHATQ_WEB_WORKER_CONNECTIONS",
        12000,
        whole,
        unit="connections",
        minimum=1,
        doc="parked requests per web process (gunicorn `--worker-connections`)",
    )

    max_held_requests_per_key: int = setting(
        "CHATQ_MAX_HELD_REQUESTS_PER_KEY",
        1000,
        whole,
        unit="requests, `0` = no cap",
        doc=(
            "most requests one key name holds open at once in each web process: long-polls "
            "(`wait`), held completions and responses, Server-Sent Events streams; over it a "
            "long-poll is answered at once and the others get `429 too_many_held_requests` (see "
            "[Held requests](#held-requests-per-key))"
        ),
    )

    keepalive_s: int = setting(
        "CHATQ_KEEPALIVE",
        75,
        whole,
        unit="s",
        minimum=1,
        doc=(
            "HTTP keep-alive of idle client connections (above the 60 s idle timeout of load "
            "balancers, so they never reuse a connection chatq just closed)"
        ),
    )

    header_timeout_s: float = setting(
        "CHATQ_HEADER_TIMEOUT",
        10.0,
        number,
        unit="s",
        minimum=0.1,
        doc=(
            "a request's line and headers must arrive within this long of its first byte (of the "
            "connection's opening, for its first request); a connection that has not sent them by"
            " then is closed with nothing sent"
        ),
    )

    graceful_timeout_s: int = setting(
        "CHATQ_GRACEFUL_TIMEOUT",
        30,
        whole,
        unit="s",
        minimum=1,
        doc=(
            "on SIGTERM, how long held `/v1/chat/completions` may go on before they answer `503`;"
            " the web exits at most 2 s later"
        ),
    )

    max_body_bytes: int = setting(
        "CHATQ_MAX_BODY_BYTES",
        1024 * 1024,
        whole,
        unit="bytes",
        minimum=1,
        doc="larger bodies get `413`",
    )

    max_wait_s: float = setting(
        "CHATQ_MAX_WAIT",
        55.0,
        number,
        unit="s",
        doc="cap of any `wait`",
    )

    result_wait_s: float = setting(
        "CHATQ_RESULT_WAIT",
        25.0,
        number,
        unit="s",
        doc="default `wait` of `/result`",
    )

    default_model: str = setting(
        "CHATQ_DEFAULT_MODEL",
        "gpt-4o-mini",
        text,
        unit="model",
        doc="when a request names none",
    )

    cancel_on_disconnect: bool = setting(
        "CHATQ_CANCEL_ON_DISCONNECT",
        False,
        flag,
        doc="cancel a job when its `/v1/chat/completions` stream client disconnects",
    )

    sse_keepalive_s: float = setting(
        "CHATQ_SSE_KEEPALIVE",
        15.0,
        number,
        unit="s",
        minimum=0.1,
        doc="silence after which an SSE stream sends a `: keepalive` comment",
    )

    backend_retry_after_s: int = setting(
        "CHATQ_BACKEND_RETRY_AFTER",
        2,
        whole,
        unit="s",
        minimum=1,
        doc="`Retry-After` of `503 backend_unavailable`",
    )
