"""One pub/sub listener per process that wakes the requests waiting on a job."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from chatq import keys
from chatq.jobs import record as jobs
from chatq.jobs.events import Carried, decode_carried
from chatq.jobs.store import PROGRESS
from chatq.jobs.waiters import Waiter, Waiters
from chatq.scripting import is_cluster

log = logging.getLogger(__name__)

RECONNECT_DELAY_S = 0.5
# While Redis stays away the listener retries every RECONNECT_DELAY_S but says so at most this
# often: one line per outage, not two a second.
LOST_REPEAT_S = 30.0
# Every shard's channel, and the `{g}` slot's (batches).
CHANNELS = [*(keys.notify(shard) for shard in keys.SHARDS), keys.notify_global()]


class Listener:
    """Holds one pub/sub connection; wakes the waiters of each job notified on it."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._waiters = Waiters()
        self._lock = threading.Lock()
        self._started = False
        self._stopping = threading.Event()
        self.connected = threading.Event()
        self.draining = False
        # While draining, requests that hold on through it answer by then (monotonic).
        self.hold_until = math.inf
        # Messages of the global channel that are no job's: topic -> (on a message with
        # the rest of it, on (re)subscribing or losing Redis with whether it now listens).
        self._topics: dict[str, tuple[Callable[[str], None], Callable[[bool], None]]] = {}
        # Whether the global channel is subscribed now; changed, and told to the topics,
        # under _topics_lock, so that a topic watched meanwhile is told the same.
        self._hearing_global = False
        self._topics_lock = threading.Lock()

    def watch(
        self, topic: str, on_message: Callable[[str], None], on_reset: Callable[[bool], None]
    ) -> None:
        """Call `on_message` with the rest of each `topic` message; `on_reset` now and each
        time messages may have been missed, with whether this listener hears them now
        (False until it has subscribed: answers kept before could miss a change)."""
        with self._topics_lock:
            self._topics[topic] = (on_message, on_reset)
            # Already subscribed (the listener started before this topic was watched): no
            # subscription message is coming to say so.
            on_reset(self._hearing_global)
        self.start()

    def _reset_topics(self, listening: bool) -> None:
        with self._topics_lock:
            self._hearing_global = listening
            for _, on_reset in list(self._topics.values()):
                on_reset(listening)

    def start(self) -> None:
        """Start the listening thread once (a greenlet under gevent)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._run, name="chatq-listener", daemon=True).start()

    def stop(self) -> None:
        """Ask the listening thread to end."""
        self._stopping.set()

    def drain(self, hold_until: float) -> None:
        """The process is stopping: long-polls answer now with what they have; requests that
        hold on through a drain may go on until `hold_until` (time.monotonic)."""
        self.hold_until = hold_until
        self.draining = True
        self.wake_all()

    def stops(self, through_drain: bool) -> bool:
        """Whether a waiter must stop waiting now, the process being drained."""
        if not self.draining:
            return False
        return not through_drain or time.monotonic() >= self.hold_until

    @property
    def waiter_count(self) -> int:
        """How many requests are parked now."""
        return self._waiters.count()

    def waiting(self, job_id: str, terminal_only: bool) -> Waiter:
        """A waiter for `job_id`, registered for the duration of a `with` block.

        Callers read the job after entering (or create it), so that no change between their
        read and the registration is missed.
        """
        self.start()
        return Waiter(self._waiters, job_id, terminal_only)

    def wake(
        self, job_id: str, status: str, snapshot: str = "", carried: Carried | None = None
    ) -> None:
        """Wake the waiters of `job_id` that care about a change to `status`; `carried`: the
        one new delta, when the notification carries it."""
        self._waiters.wake(job_id, status, snapshot, carried)

    def wake_all(self) -> None:
        """Wake every waiter so it re-reads: used when notifications may have been missed."""
        self._waiters.wake_all()

    def _run(self) -> None:
        warned_at = -math.inf
        while not self._stopping.is_set():
            try:
                self._listen()
            except (redis.RedisError, OSError) as exc:
                if not self._stopping.is_set():  # not worth a warning while stopping
                    warned_at = self._warn_lost(type(exc).__name__, warned_at)
            except Exception:
                # Never let the one listener of this process die: waiters would all time out.
                log.exception("notification listener failed; listening again")
            self.connected.clear()
            self._reset_topics(False)
            self.wake_all()
            self._stopping.wait(RECONNECT_DELAY_S)

    def _warn_lost(self, error: str, warned_at: float) -> float:
        """Say that Redis was lost: at once if the listener was connected, else (the same
        outage going on) at most every LOST_REPEAT_S. Answers when it last said so."""
        if self.connected.is_set():
            log.warning("notification listener lost Redis: %s", error)
        elif time.monotonic() - warned_at >= LOST_REPEAT_S:
            log.warning("notification listener cannot reach Redis: %s", error)
        else:
            return warned_at
        return time.monotonic()

    def _listen(self) -> None:
        if is_cluster(self._client):
            self._listen_sharded()
            return
        self._listen_to(self._client, CHANNELS, sharded=False)

    def _listen_to(self, client: Any, channels: list[str], sharded: bool) -> None:
        """Until stopped or an error: the messages of `channels` on one connection."""
        pubsub = client.pubsub()
        try:
            if sharded:
                pubsub.ssubscribe(*channels)
            else:
                pubsub.subscribe(*channels)
            while not self._stopping.is_set():
                message = pubsub.get_message(timeout=1.0)
                if message is not None:
                    self._dispatch(message)
        finally:
            pubsub.close()

    def _listen_sharded(self) -> None:
        """On a Cluster: one connection per primary, to the shard channels it serves
        (sharded pub/sub), each read by a thread; any error starts them all again."""
        cluster: Any = self._client
        cluster.nodes_manager.initialize()  # the current primaries, after a failover too
        by_node: dict[str, list[str]] = {}
        for channel in CHANNELS:
            by_node.setdefault(cluster.get_node_from_key(channel).name, []).append(channel)
        ended = threading.Event()
        for name, channels in by_node.items():
            node = cluster.get_node(node_name=name).redis_connection
            threading.Thread(
                target=self._node_listener, args=(node, channels, ended), daemon=True
            ).start()
        while not self._stopping.is_set() and not ended.wait(1.0):
            pass
        if not self._stopping.is_set():
            raise redis.ConnectionError("a node's notification connection ended")

    def _node_listener(self, node: Any, channels: list[str], ended: threading.Event) -> None:
        try:
            self._listen_to(node, channels, sharded=True)
        except Exception as exc:
            # The warning is _run's, at most one per outage: this line repeats at each try.
            log.debug("notification listener lost a node: %s", type(exc).__name__)
        finally:
            ended.set()

    def _dispatch(self, message: dict[str, object]) -> None:
        if message.get("type") in ("subscribe", "ssubscribe"):
            # (Re)subscribed: changes made while we were not listening were not heard.
            self.connected.set()
            if message.get("channel") == keys.notify_global():
                self._reset_topics(True)
            self.wake_all()
            return
        data = message.get("data")
        if message.get("type") not in ("message", "smessage") or not isinstance(data, str):
            return
        # "<id> <status> <snapshot>", "+ <id> <id> ..." (more text), or "<topic> <message>".
        head, _, rest = data.partition(" ")
        if head in self._topics:
            self._topics[head][0](rest)
            return
        if head == PROGRESS:
            ids, _, raw = rest.partition("\n")
            carried = decode_carried(raw)
            for each in ids.split():
                self.wake(each, jobs.IN_PROGRESS, carried=carried.get(each))
            return
        status, _, snapshot = rest.partition(" ")
        self.wake(head, status, snapshot)
