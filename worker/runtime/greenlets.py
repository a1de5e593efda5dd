"""Free each finished task's greenlet by reference counting, not by the cycle collector.

Celery's gevent pool binds its no-op `terminate` as a method onto every task greenlet (for a
remote revoke with terminate, which chatq turns off). The greenlet then refers to itself, so
it and all it holds (its frames, gevent.local's per-greenlet dicts and weakref callbacks:
about 20 objects a job) wait for a full collection; those stopped the worker for up to
0.7 s. A plain function in the same attribute keeps the interface without the cycle.
"""

from __future__ import annotations

from typing import Any

_installed = False


def _no_terminate(signal: Any = None) -> None:
    """What Celery's own `_terminate` does: nothing (TaskPool.terminate_job kills instead)."""


def install_greenlet_fix() -> None:
    """Make the gevent pool's task greenlets free of reference cycles."""
    global _installed
    if _installed:
        return
    from celery.concurrency import gevent as pool

    spawn = pool.TaskPool.on_apply

    def on_apply(self: Any, *args: Any, **kwargs: Any) -> Any:
        greenlet = spawn(self, *args, **kwargs)
        greenlet.terminate = _no_terminate
        return greenlet

    pool.TaskPool.on_apply = on_apply  # type: ignore[method-assign]
    _installed = True
