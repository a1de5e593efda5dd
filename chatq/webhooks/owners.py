"""Which key names have webhook endpoints, as this process last read them: asked at every
submit, so a web keeps the answers while its notification listener hears every change.

An endpoint made or deleted anywhere publishes `~webhooks <owner>` on the global notification
channel; the listener drops that owner's answer, and all of them whenever it (re)subscribes or
loses Redis (changes may have gone unheard). An answer read from Redis is kept only if no
change arrived while it was being read.
"""

from __future__ import annotations

import threading
from typing import Any

from chatq import keys
from chatq.scripting import is_cluster

TOPIC = "~webhooks"


class KnownOwners:
    """The answers of `Endpoints.has_any`, valid while the listener hears every change."""

    def __init__(self) -> None:
        self._answers: dict[str, bool] = {}
        self._generation = 0
        self._listening = False
        self._lock = threading.Lock()

    def get(self, owner: str) -> tuple[bool | None, int]:
        """(The kept answer for `owner`, or None), and the generation to `put` a new one with."""
        with self._lock:
            answer = self._answers.get(owner) if self._listening else None
            return answer, self._generation

    def put(self, owner: str, answer: bool, generation: int) -> None:
        """Keep `answer`, read since `generation`, unless a change arrived meanwhile."""
        with self._lock:
            if self._listening and generation == self._generation:
                self._answers[owner] = answer

    def changed(self, owner: str) -> None:
        """An endpoint of `owner` was made or deleted."""
        with self._lock:
            self._generation += 1
            self._answers.pop(owner, None)

    def reset(self, listening: bool) -> None:
        """Forget every answer; keep new ones only while `listening`."""
        with self._lock:
            self._generation += 1
            self._answers.clear()
            self._listening = listening


def announce_change(client: Any, owner: str) -> None:
    """Tell every process's listener that `owner`'s endpoints changed."""
    message = f"{TOPIC} {owner}"
    if is_cluster(client):
        client.spublish(keys.notify_global(), message)
    else:
        client.publish(keys.notify_global(), message)
