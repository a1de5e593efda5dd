"""A row of the targets table, and the small helpers every judge uses."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

JSON = dict[str, Any]


@dataclass
class Row:
    """One line of the results table; `met` is None when there is no target or no figure."""

    measure: str
    target: str
    reached: str
    met: bool | None
    issue: int = 6

    def as_dict(self) -> JSON:
        """A JSON-ready copy."""
        return asdict(self)


def dig(data: Any, *path: Any) -> Any:
    """data[p0][p1]…, or None as soon as a step is missing."""
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def level(levels: list[JSON] | None, key: str, value: Any) -> JSON | None:
    """The first of `levels` whose `key` is `value`."""
    return next((lv for lv in levels or [] if lv.get(key) == value), None)


def missing(measure: str, target: str, issue: int = 6, why: str = "") -> Row:
    """A row whose figure this run did not make."""
    return Row(measure, target, why or "not measured in this run", None, issue)


def fmt(x: Any, unit: str = "") -> str:
    """A figure with thousands separators (one decimal for floats), or — when missing."""
    if x is None:
        return "—"
    return f"{x:,.1f}{unit}" if isinstance(x, float) else f"{x:,}{unit}"


def all_met(parts: list[bool | None]) -> bool | None:
    """False if a part failed, None if a part could not be judged, else True."""
    if any(p is False for p in parts):
        return False
    return None if any(p is None for p in parts) else True


def cpu_line(cpu: JSON | None) -> str:
    """`name n %` for each process: its CPU as a share of one core."""
    return ", ".join(f"{k} {v['cpu_pct']} %" for k, v in (cpu or {}).items())


def table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("—" if c is None else str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
