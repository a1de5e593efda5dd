"""Settings: a bare key is named by its hash, and no repr of the settings shows a secret."""

from __future__ import annotations

import hashlib

from chatq.config import settings as config

BARE_KEY = "bare-2c7e91f04a5d6b38e1"
NAMED_KEY = "sk-named-8d0b3f6e2a91"
UPSTREAM_KEY = "up-secret-47c1d9a0e6"
REDIS_PASSWORD = "redis-pw-5e8a2c"
METRICS_TOKEN = "metrics-token-1b7d40c9e2"


def test_a_bare_key_is_named_by_its_hash_never_by_itself() -> None:
    pairs = config.parse_api_keys(f"{BARE_KEY}, alice:{NAMED_KEY}")
    expected = "key-" + hashlib.sha256(BARE_KEY.encode()).hexdigest()[:12]
    assert pairs == ((expected, BARE_KEY), ("alice", NAMED_KEY))
    assert BARE_KEY not in expected


def test_two_bare_keys_get_two_names() -> None:
    names = [name for name, _ in config.parse_api_keys("first-key-0001,second-key-0002")]
    assert len(set(names)) == 2 and all(n.startswith("key-") and len(n) == 16 for n in names)


def test_no_repr_of_the_settings_shows_a_key_or_a_password() -> None:
    settings = config.load(
        {
            "CHATQ_API_KEYS": f"{BARE_KEY},alice:{NAMED_KEY}",
            "CHATQ_UPSTREAM_API_KEY": UPSTREAM_KEY,
            "CHATQ_METRICS_TOKEN": METRICS_TOKEN,
            "CHATQ_REDIS_URL": f"redis://default:{REDIS_PASSWORD}@127.0.0.1:6379/0",
            "CHATQ_UPSTREAM_URLS": f"https://user:{REDIS_PASSWORD}x@llm.example/v1",
        }
    )
    for shown in (repr(settings), str(settings), f"{settings}", f"{settings!r}"):
        for secret in (BARE_KEY, NAMED_KEY, UPSTREAM_KEY, REDIS_PASSWORD, METRICS_TOKEN):
            assert secret not in shown, secret
        # What is not secret is still there to read.
        assert "alice" in shown and config.bare_key_name(BARE_KEY) in shown
        assert "redis://default:***@127.0.0.1:6379/0" in shown
        assert "llm.example" in shown and "max_n=8" in shown
    # The values themselves are untouched: only their repr is masked.
    assert settings.upstream_api_key == UPSTREAM_KEY
    assert settings.metrics_token == METRICS_TOKEN
    assert dict(settings.api_keys)["alice"] == NAMED_KEY


def test_an_unset_secret_reads_as_empty_in_the_repr() -> None:
    shown = repr(config.Settings())
    assert "upstream_api_key=''" in shown and "api_keys=()" in shown


def test_the_caps_are_read_with_zero_meaning_no_cap() -> None:
    assert (config.Settings().max_n, config.Settings().max_output_tokens) == (8, 0)
    settings = config.load({"CHATQ_MAX_N": "0", "CHATQ_MAX_OUTPUT_TOKENS": "2048"})
    assert (settings.max_n, settings.max_output_tokens) == (0, 2048)


def test_the_secrets_the_logs_redact_are_every_masked_field_s_values() -> None:
    sentinel_password = "sentinel-pw-93e0a1"
    settings = config.load(
        {
            "CHATQ_API_KEYS": f"{BARE_KEY},alice:{NAMED_KEY}",
            "CHATQ_UPSTREAM_API_KEY": UPSTREAM_KEY,
            "CHATQ_METRICS_TOKEN": METRICS_TOKEN,
            "CHATQ_REDIS_SENTINEL_PASSWORD": sentinel_password,
        }
    )
    assert sorted(settings.secret_values()) == sorted(
        [BARE_KEY, NAMED_KEY, UPSTREAM_KEY, METRICS_TOKEN, sentinel_password]
    )
    assert config.load({}).secret_values() == []


def test_a_number_is_shown_whatever_its_name_ends_with() -> None:
    shown = repr(config.load({"CHATQ_MAX_HELD_REQUESTS_PER_KEY": "7"}))
    assert "max_held_requests_per_key=7" in shown and "files_max_count_per_key=1000" in shown
