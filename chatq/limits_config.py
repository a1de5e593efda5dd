"""A key's token limits and budgets as configured (CHATQ_KEY_*), and the parsing of
CHATQ_KEY_LIMITS, its per-key overrides. Redis's side is chatq/limits.py."""

from __future__ import annotations

from dataclasses import dataclass, replace

# The words of CHATQ_KEY_LIMITS and the field each sets.
FIELDS = {
    "rpm": "requests_per_minute",
    "tpm": "tokens_per_minute",
    "day": "tokens_per_day",
    "month": "tokens_per_month",
}


@dataclass(frozen=True)
class KeyLimits:
    """What one key may use; 0 is no limit."""

    requests_per_minute: int = 0
    tokens_per_minute: int = 0
    tokens_per_day: int = 0
    tokens_per_month: int = 0

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
