"""Blocking system calls kept off gevent's event loop.

Under gevent a call that blocks in the kernel without a socket (`fsync`, a large file's
`write` once the kernel throttles dirty pages) stops every greenlet of the process for as long
as it takes. Such calls run here on one of gevent's OS threads while the loop goes on; in a
process that is not monkey-patched (threads, the tests' in-process app) they run in place.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("threading"))


def call(fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` on a thread of gevent's pool when the process runs under gevent, else here."""
    if not _patched():
        return fn(*args)
    from gevent import get_hub

    result: T = get_hub().threadpool.apply(fn, args)
    return result
