"""The settings of fair dispatch (CHATQ_FAIR_DISPATCH, CHATQ_TENANT_*), and the parsing of
those given per key name."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config.env import ConfigError, Reading, flag, whole
from chatq.config.fields import setting


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


def _read_counts(
    r: Reading, sep: str, joiner: str | None, least: int
) -> tuple[tuple[str, int], ...]:
    try:
        return parse_counts(r.name, r.text, sep, joiner, r.key_names(), least)
    except ValueError as exc:  # its message names the variable
        raise ConfigError(str(exc)) from None


def read_weights(r: Reading) -> tuple[tuple[str, int], ...]:
    return _read_counts(r, ":", ",", 1)


def read_running_caps(r: Reading) -> tuple[tuple[str, int], ...]:
    return _read_counts(r, "=", None, 0)


@dataclass(frozen=True, repr=False)
class FairSettings:
    """Fair dispatch across tenants: on or off, weights and running caps per key name."""

    fair_dispatch: bool = setting(
        "CHATQ_FAIR_DISPATCH",
        True,
        flag,
        doc=(
            "a queue per key name in each lane, read in turn by the workers (see [Fair dispatch "
            "across tenants](#fair-dispatch-across-tenants)); `0`: one FIFO queue per lane, as "
            "before"
        ),
    )

    tenant_weights: tuple[tuple[str, int], ...] = setting(
        "CHATQ_TENANT_WEIGHTS",
        (),
        read_weights,
        unit="`name:N,…`",
        note="each `1`",
        doc=(
            "how many messages in a row a key name takes when its turn comes in a lane (every "
            "name must be one of `CHATQ_API_KEYS`)"
        ),
    )

    tenant_max_running: int = setting(
        "CHATQ_TENANT_MAX_RUNNING",
        0,
        whole,
        unit="jobs",
        note="no cap",
        doc=(
            "most jobs of one key name running at once, across all workers; more wait `queued` "
            "(the job store must be one Redis, not a Cluster)"
        ),
    )

    tenant_max_running_overrides: tuple[tuple[str, int], ...] = setting(
        "CHATQ_TENANT_MAX_RUNNING_OVERRIDES",
        (),
        read_running_caps,
        unit="`name=N name2=N`",
        doc=(
            "per-key-name caps over the one above (whitespace-separated, as "
            "`CHATQ_RATE_LIMIT_OVERRIDES`; `0` is no cap)"
        ),
    )
