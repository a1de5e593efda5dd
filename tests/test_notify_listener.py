"""The one pub/sub listener of a web process, against a real Redis that goes away: an outage
is one warning line, however many times the listener tries again, and the end of a listener
stopped on purpose is none."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis

from chatq import keys
from chatq.jobs.notify import RECONNECT_DELAY_S, Listener
from scripts.localredis import LocalRedis
from tests.procs import wait_until


@contextmanager
def _subscribed(
    caplog: pytest.LogCaptureFixture,
) -> Iterator[tuple[LocalRedis, Listener, Callable[[], list[str]]]]:
    """A listener subscribed to a Redis of its own, and its own warnings so far (listeners
    that earlier tests of this process left behind may log too: not theirs)."""
    server = LocalRedis().start()
    client = redis.Redis.from_url(server.url, socket_connect_timeout=0.5, decode_responses=True)
    listener = Listener(client)
    earlier = {thread.ident for thread in threading.enumerate()}

    def lines() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "chatq.jobs.notify" and r.thread not in earlier
        ]

    try:
        with caplog.at_level(logging.WARNING, logger="chatq.jobs.notify"):
            listener.start()
            wait_until(listener.connected.is_set, 10, "listener subscribed")
            yield server, listener, lines
    finally:
        listener.stop()
        server.stop()


def test_a_redis_outage_is_one_warning_line_not_one_per_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with _subscribed(caplog) as (server, _, lines):
        server.stop()
        # Enough for several tries again (one every RECONNECT_DELAY_S).
        time.sleep(6 * RECONNECT_DELAY_S)
        assert lines() == ["notification listener lost Redis: ConnectionError"]


def test_a_stopped_listener_says_nothing_of_its_redis_going(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with _subscribed(caplog) as (server, listener, lines):
        listener.stop()  # a web shutting down, or a test's app at its end
        server.stop()
        time.sleep(4 * RECONNECT_DELAY_S)
        assert lines() == []


def test_a_topic_watched_after_the_listener_subscribed_is_heard_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with _subscribed(caplog) as (server, listener, _):
        states: list[bool] = []
        heard: list[str] = []
        # A web's routes are set up after its listener started (the webhook answers' cache):
        # no subscription message is coming to tell the topic it is heard.
        listener.watch("~topic", heard.append, states.append)
        assert states == [True]
        redis.Redis.from_url(server.url).publish(keys.notify_global(), "~topic news")
        wait_until(lambda: heard == ["news"], 5, "the topic's message")
        server.stop()
        wait_until(lambda: states[-1] is False, 5, "the loss told to the topic")
