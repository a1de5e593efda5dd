"""The settings of fair dispatch across tenants (CHATQ_FAIR_DISPATCH, CHATQ_TENANT_*), parsed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _count(what: str, raw: str, least: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{what}: `{raw}` is not a whole number") from None
    if value < least:
        raise ValueError(f"{what}: `{raw}` must be at least {least}")
    return value


def _pairs(
    variable: str, raw: str, sep: str, joiner: str | None, names: set[str], least: int
) -> tuple[tuple[str, int], ...]:
    """`name<sep>N` items split by `joiner` (None: whitespace), each name one of `names`."""
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


def fair_settings(env: Mapping[str, str], names: set[str]) -> dict[str, Any]:
    """The Settings fields of fair dispatch from `env`; `names` are the key names."""
    raw_fair = env.get("CHATQ_FAIR_DISPATCH", "1").strip().lower()
    if raw_fair not in ("0", "1", "true", "false", "yes", "no", "on", "off", ""):
        raise ValueError(f"CHATQ_FAIR_DISPATCH: `{raw_fair}` is not 0 or 1")
    return {
        "fair_dispatch": raw_fair in ("1", "true", "yes", "on", ""),
        "tenant_weights": _pairs(
            "CHATQ_TENANT_WEIGHTS", env.get("CHATQ_TENANT_WEIGHTS", ""), ":", ",", names, 1
        ),
        "tenant_max_running": _count(
            "CHATQ_TENANT_MAX_RUNNING", env.get("CHATQ_TENANT_MAX_RUNNING", "0").strip() or "0", 0
        ),
        "tenant_max_running_overrides": _pairs(
            "CHATQ_TENANT_MAX_RUNNING_OVERRIDES",
            env.get("CHATQ_TENANT_MAX_RUNNING_OVERRIDES", ""),
            "=",
            None,
            names,
            0,
        ),
    }
