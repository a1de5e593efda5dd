"""Parsing the per-key-name settings of fair dispatch (CHATQ_TENANT_WEIGHTS,
CHATQ_TENANT_MAX_RUNNING_OVERRIDES); chatq/config.py reads them."""

from __future__ import annotations


def _count(variable: str, raw: str, least: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{variable}: `{raw}` is not a whole number") from None
    if value < least:
        raise ValueError(f"{variable}: `{raw}` must be at least {least}")
    return value


def parse_counts(
    variable: str, raw: str, sep: str, joiner: str | None, names: set[str], least: int
) -> tuple[tuple[str, int], ...]:
    """`name<sep>N` items split by `joiner` (None: whitespace) into (name, N) pairs; every
    name must be one of `names` (the key names) and every N at least `least`."""
    pairs: list[tuple[str, int]] = []
    for item in raw.split(joiner):
        item = item.strip()
        if not item:
            continue
        name, found, value = item.partition(sep)
        if not found or not name:
            raise ValueError(f"{variable}: `{item}` is not `name{sep}N`")
        if name not in names:
            raise ValueError(f"{variable}: `{name}` is not the name of a key in CHATQ_API_KEYS")
        pairs.append((name, _count(variable, value, least)))
    return tuple(pairs)
