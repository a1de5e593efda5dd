"""The one pub/sub listener of a web process, against a real Redis that goes away: an outage
is one warning line, however many times the listener tries again."""

from __future__ import annotations

import logging
import time

import pytest
import redis

from chatq.notify import RECONNECT_DELAY_S, Listener
from scripts.localredis import LocalRedis
from tests.procs import wait_until


def test_a_redis_outage_is_one_warning_line_not_one_per_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = LocalRedis().start()
    listener = Listener(redis.Redis.from_url(server.url, socket_connect_timeout=0.5))
    try:
        with caplog.at_level(logging.WARNING, logger="chatq.notify"):
            listener.start()
            wait_until(listener.connected.is_set, 10, "listener subscribed")
            server.stop()
            # Enough for several tries again (one every RECONNECT_DELAY_S).
            time.sleep(6 * RECONNECT_DELAY_S)
    finally:
        listener.stop()
        server.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "chatq.notify"]
    assert lines == ["notification listener lost Redis: ConnectionError"], lines
