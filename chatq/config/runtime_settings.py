"""The settings of logs and metrics."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config.env import Choice, flag, text, upper
from chatq.config.fields import setting


@dataclass(frozen=True, repr=False)
class RuntimeSettings:
    """Logs and metrics."""

    log_level: str = setting(
        "CHATQ_LOG_LEVEL",
        "INFO",
        upper,
        unit="level",
        doc=(
            "Celery's own lines per message received and per task done only at `DEBUG` (chatq's "
            "job lines say the same)"
        ),
    )

    log_format: str = setting(
        "CHATQ_LOG_FORMAT",
        "text",
        Choice(("text", "json")),
        doc="one line per request and per job transition",
    )

    access_log: bool = setting(
        "CHATQ_ACCESS_LOG",
        True,
        flag,
        doc=(
            "the web's line per request (logger `chatq.web.requests`, at `INFO`); `0` drops it "
            "and keeps every other line: about 60 µs of a web process's CPU per request, a tenth "
            "of a woken long-poll's"
        ),
    )

    metrics_dir: str = setting(
        "CHATQ_METRICS_DIR",
        "",
        text,
        unit="path",
        note="a fresh temporary folder, removed when the web stops",
        doc="gunicorn's multiprocess metrics folder (set by `python -m web`)",
    )

    metrics_token: str = setting(
        "CHATQ_METRICS_TOKEN",
        "",
        text,
        unit="secret",
        note="no scrape reads a key's series",
        doc=(
            "the bearer token a scrape of `/metrics` (the web's and each worker's) sends to read "
            "the series that name a key (label `key`); a scrape without an `Authorization` header"
            " gets every other series, one with other credentials `401 invalid_metrics_token` "
            "(see [Metrics](#metrics)); never logged"
        ),
    )
