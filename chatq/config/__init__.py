"""Settings: every CHATQ_* variable, read once, with its default and unit."""

from chatq.config.env import LANES, ConfigError, is_amqp
from chatq.config.limit_settings import KeyLimits
from chatq.config.settings import Settings, load
from chatq.config.webhook_settings import (
    MAX_URL_CHARS,
    SECRET_PREFIX,
    IPAddress,
    WebhookConfig,
    literal_address,
    url_problem,
)

__all__ = [
    "LANES",
    "MAX_URL_CHARS",
    "SECRET_PREFIX",
    "ConfigError",
    "IPAddress",
    "KeyLimits",
    "Settings",
    "WebhookConfig",
    "is_amqp",
    "literal_address",
    "load",
    "url_problem",
]
