"""The settings of the limits on what a key may send: the web's guard (CHATQ_RATE_LIMIT), a
key's token limits and budgets (CHATQ_KEY_*) and CHATQ_KEY_LIMITS, their per-key overrides.
Redis's side is chatq/admission/quotas.py."""

from __future__ import annotations

from dataclasses import dataclass, replace

from chatq.config.env import ConfigError, Reading, from_text, parse_overrides, text, whole
from chatq.config.fields import group, setting

# The words of CHATQ_KEY_LIMITS and the field each sets.
FIELDS = {
    "rpm": "requests_per_minute",
    "tpm": "tokens_per_minute",
    "day": "tokens_per_day",
    "month": "tokens_per_month",
}


@dataclass(frozen=True)
class KeyLimits:
    """What one key may use; 0 is no limit. Read as settings (CHATQ_KEY_*), the limits of every
    key that CHATQ_KEY_LIMITS does not name."""

    requests_per_minute: int = setting(
        "CHATQ_KEY_RPM",
        0,
        whole,
        unit="requests per minute",
        note="none",
        doc=(
            "each key's chat requests (those that make a job) and webhook replays per minute; see"
            " [Limits and budgets](#limits-and-budgets)"
        ),
    )

    tokens_per_minute: int = setting(
        "CHATQ_KEY_TPM",
        0,
        whole,
        unit="tokens per minute",
        note="none",
        doc=(
            "each key's tokens per minute: prompt and requested output at admission, corrected by"
            " what the job used"
        ),
    )

    tokens_per_day: int = setting(
        "CHATQ_KEY_TOKENS_PER_DAY",
        0,
        whole,
        unit="tokens",
        note="none",
        doc="each key's token budget per UTC day; over it, `429 insufficient_quota`",
    )

    tokens_per_month: int = setting(
        "CHATQ_KEY_TOKENS_PER_MONTH",
        0,
        whole,
        unit="tokens",
        note="none",
        doc="each key's token budget per UTC calendar month",
    )

    @property
    def any(self) -> bool:
        """Whether anything is limited."""
        return any(
            (
                self.requests_per_minute,
                self.tokens_per_minute,
                self.tokens_per_day,
                self.tokens_per_month,
            )
        )


NO_LIMITS = KeyLimits()


def _count(word: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"`{word}:{raw}` needs a whole number") from None
    if value < 0:
        raise ValueError(f"`{word}:{raw}` must be at least 0")
    return value


def _one(entry: str, default: KeyLimits) -> KeyLimits:
    """`tpm:40000,rpm:60` over `default`."""
    limits = default
    for part in entry.split(","):
        word, sep, raw = part.partition(":")
        if not sep or word not in FIELDS:
            raise ValueError(f"`{part}` is not one of {', '.join(w + ':N' for w in FIELDS)}")
        limits = replace(limits, **{FIELDS[word]: _count(word, raw)})
    return limits


def parse_key_limits(
    raw: str, default: KeyLimits, names: set[str]
) -> tuple[tuple[str, KeyLimits], ...]:
    """`alice=tpm:40000,rpm:60 bob=day:0` into (key name, limits) pairs; what an entry does
    not name is `default`. A name that is not one of `names` (the keys) is an error."""
    pairs: list[tuple[str, KeyLimits]] = []
    for item in raw.split():
        name, sep, entry = item.partition("=")
        if not sep or not name or not entry:
            raise ValueError(f"`{item}` is not `name=tpm:N,rpm:N,day:N,month:N`")
        if name not in names:
            raise ValueError(f"`{name}` is not the name of a key in CHATQ_API_KEYS")
        pairs.append((name, _one(entry, default)))
    return tuple(pairs)


def read_key_limits(r: Reading) -> tuple[tuple[str, KeyLimits], ...]:
    """CHATQ_KEY_LIMITS over the limits of every key (read before it)."""
    default = r.earlier["key_limits"]
    assert isinstance(default, KeyLimits)
    try:
        return parse_key_limits(r.text, default, r.key_names())
    except ValueError as exc:
        raise ConfigError(f"{r.name}: {exc}") from None


@dataclass(frozen=True, repr=False)
class LimitSettings:
    """What a key may send: request rates, token limits and budgets."""

    rate_limit: str = setting(
        "CHATQ_RATE_LIMIT",
        "",
        text,
        unit="e.g. `600/minute`",
        note="none",
        doc="each key's request rate on `/v1`",
    )

    rate_limit_overrides: tuple[tuple[str, str], ...] = setting(
        "CHATQ_RATE_LIMIT_OVERRIDES",
        (),
        from_text(parse_overrides),
        unit="`name=limit name2=limit`",
        doc="per-key-name rates (`;` joins several limits)",
    )

    key_limits: KeyLimits = group(KeyLimits)  # noqa: RUF009 - a field(), as setting() is

    key_limit_overrides: tuple[tuple[str, KeyLimits], ...] = setting(
        "CHATQ_KEY_LIMITS",
        (),
        read_key_limits,
        unit="`name=rpm:N,tpm:N,day:N,month:N …`",
        doc=(
            "per-key-name limits over the four above (whitespace-separated; what an entry leaves "
            "out keeps the default; `0` is none; every name must be one of `CHATQ_API_KEYS`)"
        ),
    )

    default_output_budget: int = setting(
        "CHATQ_DEFAULT_OUTPUT_BUDGET",
        1024,
        whole,
        unit="tokens",
        minimum=1,
        doc=(
            "the output a request naming no `max_tokens` (nor `max_completion_tokens`) is charged"
            " for at admission, per choice"
        ),
    )
