"""The README's settings table, written from the declarations (chatq/config/fields.py), so that
a setting's default, unit and doc are written once, beside its parser.
`python -m scripts.settings_table [FILE]` puts the table between the markers of README.md, or
of FILE (a new FILE gets the markers and the table alone: a fragment for a docs site)."""

from __future__ import annotations

import re
from dataclasses import MISSING, Field
from pathlib import Path
from typing import Any

from chatq.config.env import Choice, flag
from chatq.config.fields import Setting, declared
from chatq.config.settings import Settings

BEGIN = (
    "<!-- settings table: written by `python -m scripts.settings_table` from chatq/config/*.py -->"
)
END = "<!-- end of the settings table -->"
HEADER = "| variable | default | unit / form | what |\n|---|---|---|---|\n"


def table(cls: type[Any] = Settings) -> str:
    """The markdown table of every setting of `cls`, one row each, in the order declared."""
    return HEADER + "".join(_row(f, spec) + "\n" for f, spec in declared(cls))


def _row(f: Field[Any], spec: Setting) -> str:
    cells = (f"`{spec.env}`", default_cell(f, spec), unit_cell(spec), spec.doc)
    return "| " + " | ".join(_escaped(cell) for cell in cells) + " |"


def _escaped(cell: str) -> str:
    """`cell` with every `|` escaped, so that it stays one cell."""
    return re.sub(r"(?<!\\)\|", r"\\|", cell)


def default_cell(f: Field[Any], spec: Setting) -> str:
    """The default as the table shows it: the value, then its note in parentheses; a default
    worked out at start is its note alone."""
    if f.default is MISSING:
        return spec.note
    shown = _shown(f.default)
    return f"{shown} ({spec.note})" if spec.note else shown


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "`1`" if value else "`0`"
    if isinstance(value, float):
        written = str(int(value)) if value.is_integer() else repr(value)
    elif isinstance(value, tuple):
        written = ",".join(str(item) for item in value)
    else:
        written = str(value)
    return f"`{written}`" if written else "empty"


def unit_cell(spec: Setting) -> str:
    """The unit or form of a value, and its bounds."""
    if spec.parse is flag:
        unit = "`0`|`1`"
    elif isinstance(spec.parse, Choice):
        unit = "|".join(f"`{word}`" for word in spec.parse.allowed)
    else:
        unit = spec.unit
    if spec.maximum is not None:
        return f"{unit}, `{_number(spec.minimum)}` to `{_number(spec.maximum)}`"
    if spec.minimum:
        return f"{unit}, at least `{_number(spec.minimum)}`"
    return unit


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def with_table(document: str, written: str) -> str:
    """`document` with `written` between its markers."""
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN} … {END} markers to write the settings table between")
    return document[: start + len(BEGIN)] + "\n" + written + document[end:]


def write_table(path: Path) -> bool:
    """Write the table between the markers of `path` (a new file: the markers and the table
    alone); whether the file changed."""
    old = path.read_text() if path.exists() else f"{BEGIN}\n{END}\n"
    new = with_table(old, table())
    if new != old:
        path.write_text(new)
    return new != old
