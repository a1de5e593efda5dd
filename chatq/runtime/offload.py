"""Work kept off a gevent process's event loop, so that it does not stop the other greenlets.

In a gevent process (the web, a worker with the gevent pool) one native thread runs every
greenlet: a call that computes for a second, or blocks in the kernel without a socket, freezes
every request and job of the process for that second. Two kinds go to native threads while the
calling greenlet waits cooperatively:

- CPU work that releases the GIL (tiktoken's encoding, in its Rust core): `off_loop`, on a
  small pool of its own (not gevent's hub pool, which also resolves host names: a flood of
  large prompts must not hold up DNS);
- blocking system calls (`fsync`): `blocking`, on gevent's hub pool.

And one kind goes to a greenlet of its own, for memory: the last Redis call of a request
before it parks (`on_fresh_stack`). A greenlet keeps every page of Python stack its frames
ever touched; redis-py's read of a reply lies ~2 KB below the frames a parked request keeps,
past the first 4 KiB page, so each parked request would keep a second page it no longer uses.

Elsewhere (a worker with the threads pool, a test's in-process app) the caller is a native
thread already and runs the work itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextvars import copy_context
from typing import Any, TypeVar, cast

T = TypeVar("T")
# Counting is CPU work: more threads than this machine's two cores would only take turns,
# and a bounded pool bounds the CPU that large prompts take from everything else.
OFFLOAD_THREADS = 2

_pools: dict[int, Any] = {}


def gevent_process() -> bool:
    """Whether gevent's monkey-patching made threads greenlets in this process."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("threading"))


def _pool() -> Any:
    """This process's pool (made after a fork, never inherited from the parent)."""
    pool = _pools.get(os.getpid())
    if pool is None:
        from gevent.threadpool import ThreadPool

        pool = _pools[os.getpid()] = ThreadPool(OFFLOAD_THREADS)
    return pool


def off_loop(work: Callable[..., T], *args: Any) -> T:
    """`work(*args)`, on a native thread of its own in a gevent process (the caller's greenlet
    waits, the others run); its exception is raised here."""
    if not gevent_process():
        return work(*args)
    result: T = _pool().apply(work, args)
    return result


def blocking(call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, a blocking system call, on one of gevent's threads in a gevent process
    (the loop goes on meanwhile); in place elsewhere."""
    if not gevent_process():
        return call(*args)
    from gevent import get_hub

    result: T = get_hub().threadpool.apply(call, args)
    return result


def on_fresh_stack(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`call(*args, **kwargs)`, in a gevent process on a greenlet of its own in a copy of the
    caller's context (Flask's request, the current span) while the caller waits: the stack
    pages its frames touch are freed as it ends, not kept by a caller that parks next. Its
    exception is raised here (not reported as a greenlet's failure). In place elsewhere."""
    if not gevent_process():
        return call(*args, **kwargs)
    from gevent import Greenlet

    child = Greenlet(_outcome, call, args, kwargs)
    child.gr_context = copy_context()
    child.start()
    value, error = child.get()
    if error is not None:
        raise error
    return cast(T, value)


def _outcome(
    call: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[T | None, Exception | None]:
    """What `call(*args, **kwargs)` returned, or what it raised."""
    try:
        return call(*args, **kwargs), None
    except Exception as error:
        return None, error
