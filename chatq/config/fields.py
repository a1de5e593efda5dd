"""Each setting declared once, on its dataclass field: its variable, default, unit, bounds,
one-line doc and parser (`setting`). `read_settings` reads a dataclass of them from the
environment, each variable once, in the order declared; chatq/config/table.py writes the
README's table from the same declarations."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from chatq.config.env import Reading

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
D = TypeVar("D", bound="DataclassInstance")

# The keys of a field's metadata: its Setting, or the dataclass of a group of settings.
SETTING = "chatq.setting"
GROUP = "chatq.settings_group"


@dataclass(frozen=True)
class Setting:
    """How one field is read from its variable and shown in the table. `note` follows the
    default in the table (what an empty value means); `keep_empty`: a variable set to nothing
    is the empty value rather than the default."""

    env: str
    parse: Callable[[Reading], object]
    doc: str
    unit: str = ""
    note: str = ""
    minimum: float = 0
    maximum: float | None = None
    keep_empty: bool = False


def setting(
    env: str,
    default: T,
    parse: Callable[[Reading], T],
    *,
    doc: str,
    unit: str = "",
    note: str = "",
    minimum: float = 0,
    maximum: float | None = None,
    keep_empty: bool = False,
) -> T:
    """A field read from `env` by `parse`, `default` when unset or blank."""
    spec = Setting(env, parse, doc, unit, note, minimum, maximum, keep_empty)
    return field(default=default, metadata={SETTING: spec})


def computed_setting(
    env: str,
    factory: Callable[[], T],
    parse: Callable[[Reading], T],
    *,
    doc: str,
    unit: str,
    note: str,
) -> T:
    """A setting whose default `factory` works out when the settings are made; `note` says
    what it is, for the table."""
    return field(default_factory=factory, metadata={SETTING: Setting(env, parse, doc, unit, note)})


def group(cls: Callable[[], T]) -> T:
    """A field holding a dataclass of settings of its own, read as the fields around it."""
    return field(default_factory=cls, metadata={GROUP: cls})


def read_settings(cls: type[D], env: Mapping[str, str]) -> D:
    """The dataclass `cls` with every field read from `env`: each variable once, in the
    order declared, so that a parser may check its value against those read before it."""
    read: dict[str, object] = {}
    for f in fields(cls):
        read[f.name] = _read(f, env, read)
    return cls(**read)


def _read(f: Field[Any], env: Mapping[str, str], earlier: Mapping[str, object]) -> object:
    if GROUP in f.metadata:
        return read_settings(f.metadata[GROUP], env)
    spec: Setting = f.metadata[SETTING]
    raw = env.get(spec.env)
    text = "" if raw is None else raw.strip()
    if raw is None or not (text or spec.keep_empty):
        return default_of(f)
    return spec.parse(Reading(spec.env, text, spec.minimum, spec.maximum, earlier))


def default_of(f: Field[Any]) -> object:
    """The value a field takes when its variable is not set."""
    factory = f.default_factory
    return factory() if callable(factory) else f.default


def declared(cls: type[DataclassInstance]) -> Iterator[tuple[Field[Any], Setting]]:
    """Every setting of the dataclass `cls` with its field, in order, groups' included."""
    for f in fields(cls):
        if GROUP in f.metadata:
            yield from declared(f.metadata[GROUP])
        else:
            yield f, f.metadata[SETTING]
