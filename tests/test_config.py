"""chatq.config.settings.load: defaults, units, and a ConfigError naming the variable for a bad
value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatq.config import settings as config
from chatq.config.settings import ConfigError, Settings

ROOT = Path(__file__).resolve().parents[1]


def test_an_empty_environment_gives_the_defaults() -> None:
    assert config.load({}) == Settings()


def test_blank_values_mean_the_default() -> None:
    blank = {
        name: "  "
        for name in (
            "CHATQ_MAX_WAIT",
            "CHATQ_WEB_WORKERS",
            "CHATQ_CACHE_SHARED",
            "CHATQ_WORKER_POOL",
            "CHATQ_UPSTREAM_URLS",
            "CHATQ_DEFAULT_MODEL",
            "CHATQ_API_KEYS",
        )
    }
    assert config.load(blank) == Settings()


def test_load_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATQ_MAX_WAIT", "12.5")
    assert config.load().max_wait_s == 12.5


def _documented_defaults() -> dict[str, str]:
    rows = re.findall(
        r"^\| `(CHATQ_[A-Z_]+)` \| ([^|]*) \|", (ROOT / "docs" / "settings.md").read_text(), re.M
    )
    defaults = {}
    for name, cell in rows:
        quoted = re.match(r"\s*`([^`]*)`", cell)
        if quoted:
            defaults[name] = quoted.group(1)
        elif cell.strip().startswith("empty"):
            defaults[name] = ""
    return defaults


def test_the_documented_defaults_are_the_code_defaults() -> None:
    defaults = _documented_defaults()
    assert len(defaults) > 30
    # Setting a variable to the default docs/settings.md gives for it changes nothing.
    differing = [
        name for name, value in defaults.items() if config.load({name: value}) != Settings()
    ]
    assert differing == []


@pytest.mark.parametrize(
    "env,field,value",
    [
        ({"CHATQ_MAX_WAIT": "0.5"}, "max_wait_s", 0.5),
        ({"CHATQ_MAX_WAIT": "1e1"}, "max_wait_s", 10.0),
        ({"CHATQ_JOB_TIMEOUT": "90"}, "job_timeout_s", 90.0),
        ({"CHATQ_FLUSH_INTERVAL": "0.1"}, "flush_interval_s", 0.1),
        ({"CHATQ_LEASE": "0.5"}, "lease_s", 0.5),
        ({"CHATQ_JOB_TTL": "60"}, "job_ttl_s", 60),
        ({"CHATQ_MAX_BODY_BYTES": "2048"}, "max_body_bytes", 2048),
        ({"CHATQ_KEEPALIVE": " 80 "}, "keepalive_s", 80),
        ({"CHATQ_HEADER_TIMEOUT": "2.5"}, "header_timeout_s", 2.5),
        ({"CHATQ_WORKER_CONCURRENCY": "120"}, "worker_concurrency", 120),
        ({"CHATQ_MAX_HELD_REQUESTS_PER_KEY": "0"}, "max_held_requests_per_key", 0),
        ({"CHATQ_MAX_QUEUE_DEPTH": "0"}, "max_queue_depth", 0),
        ({"CHATQ_CACHE_TTL": "0"}, "cache_ttl_s", 0),
        ({"CHATQ_LOG_LEVEL": "debug"}, "log_level", "DEBUG"),
        ({"CHATQ_WORKER_POOL": "threads"}, "worker_pool", "threads"),
        ({"CHATQ_CONTEXT_OVERFLOW": "truncate_oldest"}, "context_overflow", "truncate_oldest"),
        ({"CHATQ_WORKER_METRICS_BIND": ""}, "worker_metrics_bind", ""),
        ({"CHATQ_WEBHOOK_CONCURRENCY": "0"}, "webhook_concurrency", 0),
        ({"CHATQ_WEBHOOK_ENDPOINT_CONCURRENCY": "5"}, "webhook_endpoint_concurrency", 5),
        ({"CHATQ_WEBHOOK_KEY_CONCURRENCY": "3"}, "webhook_key_concurrency", 3),
        (
            {"CHATQ_UPSTREAM_URLS": " http://a/v1/ ,http://b/v1,, "},
            "upstream_urls",
            ("http://a/v1", "http://b/v1"),
        ),
        ({"CHATQ_UPSTREAM_API_KEY": " sk-up "}, "upstream_api_key", "sk-up"),
        ({"CHATQ_UPSTREAM_RPM": "600"}, "upstream_rpm", 600),
        ({"CHATQ_UPSTREAM_TPM": "20000"}, "upstream_tpm", 20000),
        ({"CHATQ_UPSTREAM_PACING": "0"}, "upstream_pacing", False),
        (
            {"CHATQ_API_KEYS": "alice:sk-a, sk-bare ,"},
            "api_keys",
            (("alice", "sk-a"), (config.bare_key_name("sk-bare"), "sk-bare")),
        ),
        (
            {"CHATQ_RATE_LIMIT_OVERRIDES": "alice=10/second bob=1/minute;50/hour"},
            "rate_limit_overrides",
            (("alice", "10/second"), ("bob", "1/minute;50/hour")),
        ),
    ],
)
def test_values_are_read_in_their_units(env: dict[str, str], field: str, value: object) -> None:
    assert getattr(config.load(env), field) == value


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
    ],
)
def test_booleans_take_the_usual_spellings(raw: str, expected: bool) -> None:
    loaded = config.load({"CHATQ_CACHE_SHARED": raw, "CHATQ_CANCEL_ON_DISCONNECT": raw})
    assert loaded.cache_shared is expected and loaded.cancel_on_disconnect is expected


BAD = [
    # whole numbers
    ("CHATQ_WEB_WORKERS", "two"),
    ("CHATQ_WEB_WORKERS", "1.5"),
    ("CHATQ_WEB_WORKERS", "0"),
    ("CHATQ_WORKER_CONCURRENCY", "0"),
    ("CHATQ_MAX_BODY_BYTES", "1MB"),
    ("CHATQ_JOB_TTL", "0"),
    ("CHATQ_MAX_QUEUE_DEPTH", "-1"),
    ("CHATQ_MAX_HELD_REQUESTS_PER_KEY", "-1"),
    ("CHATQ_KEEPALIVE", "75s"),
    ("CHATQ_UPSTREAM_MAX_ATTEMPTS", "0"),
    ("CHATQ_BACKEND_RETRY_AFTER", "0"),
    ("CHATQ_CACHE_TTL", "1h"),
    ("CHATQ_FLUSH_MAX_CHARS", "0"),
    ("CHATQ_MAX_TAKEOVERS", "-1"),
    ("CHATQ_WEBHOOK_CONCURRENCY", "-1"),
    ("CHATQ_WEBHOOK_ENDPOINT_CONCURRENCY", "0"),
    ("CHATQ_WEBHOOK_KEY_CONCURRENCY", "0"),
    # numbers of seconds
    ("CHATQ_MAX_WAIT", "soon"),
    ("CHATQ_MAX_WAIT", "nan"),
    ("CHATQ_MAX_WAIT", "inf"),
    ("CHATQ_MAX_WAIT", "-1"),
    ("CHATQ_JOB_TIMEOUT", "0"),
    ("CHATQ_LEASE", "0.1"),
    ("CHATQ_QUEUE_RESEND", "0.5"),
    ("CHATQ_UPSTREAM_CONNECT_TIMEOUT", "0"),
    ("CHATQ_RETRY_BASE", "-0.5"),
    ("CHATQ_CACHE_LOCAL_TTL", "1m"),
    ("CHATQ_SSE_KEEPALIVE", "0"),
    ("CHATQ_HEADER_TIMEOUT", "0"),
    # booleans and choices
    ("CHATQ_CACHE_SHARED", "maybe"),
    ("CHATQ_CANCEL_ON_DISCONNECT", "2"),
    ("CHATQ_WORKER_POOL", "prefork"),
    ("CHATQ_LOG_FORMAT", "xml"),
    ("CHATQ_CONTEXT_OVERFLOW", "truncate"),
    # lists
    ("CHATQ_API_KEYS", "alice:"),
    ("CHATQ_API_KEYS", ":sk-a"),
    ("CHATQ_RATE_LIMIT_OVERRIDES", "alice"),
    ("CHATQ_RATE_LIMIT_OVERRIDES", "=10/second"),
    ("CHATQ_ADMIN_KEYS", "nobody"),
]


@pytest.mark.parametrize("name,raw", BAD)
def test_a_bad_value_is_a_config_error_naming_the_variable(name: str, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.load({name: raw})
    assert name in str(caught.value)


def test_a_config_error_never_repeats_a_key() -> None:
    with pytest.raises(ConfigError) as caught:
        config.load({"CHATQ_API_KEYS": "alice:sk-secret-1234,bob:"})
    assert "sk-secret-1234" not in str(caught.value)
