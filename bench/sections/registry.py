"""Every section by name, in the order a full run takes them."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from bench.lab import Lab, Recipe
from bench.sections import (
    background,
    batch,
    bodies,
    cache,
    compare,
    connections,
    e2ewake,
    fairness,
    gateway,
    gthread,
    httpmetrics,
    memory,
    pacing,
    pooling,
    prefetch,
    rediscalls,
    throughput,
    tokens,
    transport,
    waitermem,
    waiters,
)

Section = Callable[[Lab], dict[str, Any]]
MODULES: dict[str, ModuleType] = {
    "compare": compare,
    "waiters": waiters,
    "e2ewake": e2ewake,
    "waitermem": waitermem,
    "gthread": gthread,
    "throughput": throughput,
    "prefetch": prefetch,
    "gateway": gateway,
    "rediscalls": rediscalls,
    "memory": memory,
    "tokens": tokens,
    "pooling": pooling,
    "transport": transport,
    "cache": cache,
    "connections": connections,
    "background": background,
    "batch": batch,
    "fairness": fairness,
    "pacing": pacing,
    "bodies": bodies,
    "httpmetrics": httpmetrics,
}
SECTIONS: dict[str, Section] = {name: module.run for name, module in MODULES.items()}


def stacks_of(names: list[str]) -> list[Recipe]:
    """The chatq stacks these sections will ask for."""
    recipes: list[Recipe] = []
    for name in names:
        recipes += [r for r in getattr(MODULES[name], "STACKS", []) if r not in recipes]
    return recipes
