"""gevent's monkey-patching, with the installed packages' entry points read once, and
greenlets that do not record where they were spawned.

`monkey.patch_all()` tells gevent's plugins about each module it patches, and looks the
plugins up again each time: 25 reads of every installed package's metadata, 0.17 s of a
process's start with the development tools installed (7 ms a read, 135 packages).

By default each greenlet keeps the stack that spawned it (up to 10 frames), its parent and a
dict of "tree locals", for debugging tools chatq does not use: objects that every full
garbage collection walks once per parked request or running job, and a stack walk per spawn.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any


@contextmanager
def entry_points_read_once() -> Iterator[None]:
    """Within the block, `importlib.metadata.entry_points` answers from one read."""
    read = metadata.entry_points
    everything: Any = read()  # SelectableGroups on 3.11, EntryPoints later: both select

    def select(**params: Any) -> Any:
        return everything.select(**params)

    metadata.entry_points = select
    try:
        yield
    finally:
        metadata.entry_points = read


def without_spawn_tree() -> None:
    """Greenlets spawned from now on record no spawning tree (see above)."""
    import gevent

    gevent.config.track_greenlet_tree = False


def patch_all() -> None:
    """`gevent.monkey.patch_all()`, its plugins looked up once; no spawning trees."""
    from gevent import monkey

    without_spawn_tree()
    with entry_points_read_once():
        monkey.patch_all()
