"""A finished task's greenlet is freed at once by reference counting: no cycle is left for a
full collection to find, and full collections are what stopped the worker for up to 0.7 s."""

from __future__ import annotations

import gc
import weakref

import gevent
from celery.concurrency.gevent import TaskPool

from worker.runtime import greenlets


def _finished_task_greenlet_is_freed() -> bool:
    pool = TaskPool(limit=2)
    pool.start()
    gc.disable()
    try:
        greenlet = pool.on_apply(lambda: None)
        freed = weakref.ref(greenlet)
        greenlet.join()
        del greenlet
        gevent.sleep(0)  # the pool's own clean-up runs as a link of the greenlet
        return freed() is None
    finally:
        gc.enable()
        pool.stop()


def test_a_finished_task_greenlet_is_freed_without_the_cycle_collector() -> None:
    greenlets.install_greenlet_fix()
    assert _finished_task_greenlet_is_freed()
