"""Every CHATQ_* setting, read once from the environment, with its default and unit: each
declared once, on its field, in the groups below (chatq/config/fields.py says how)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from chatq.config.env import ConfigError as ConfigError  # what callers catch
from chatq.config.env import bare_key_name as bare_key_name
from chatq.config.env import parse_api_keys as parse_api_keys
from chatq.config.env import parse_sentinels as parse_sentinels
from chatq.config.fair_settings import FairSettings
from chatq.config.fields import read_settings
from chatq.config.file_settings import FilesSettings
from chatq.config.job_settings import JobSettings
from chatq.config.limit_settings import LimitSettings
from chatq.config.redis_settings import RedisSettings
from chatq.config.request_settings import RequestSettings
from chatq.config.runtime_settings import RuntimeSettings
from chatq.config.upstream_settings import UpstreamSettings
from chatq.config.web_settings import WebSettings
from chatq.config.webhook_settings import WebhookSettings


# A dataclass takes its fields from its bases last to first: listed in reverse, the fields are
# read (and the README's table written) from Redis to files. A setting that names key names
# comes after CHATQ_API_KEYS (web), the lanes after the broker (Redis).
@dataclass(frozen=True)
class Settings(
    FilesSettings,
    WebhookSettings,
    RuntimeSettings,
    FairSettings,
    LimitSettings,
    RequestSettings,
    UpstreamSettings,
    JobSettings,
    WebSettings,
    RedisSettings,
):
    """The whole configuration of a chatq process; see the README for each field."""

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
    """Build Settings from `env` (default: os.environ); a bad value is a ConfigError naming
    its variable."""
    return read_settings(Settings, os.environ if env is None else env)
