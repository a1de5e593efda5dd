"""Calling the upstream chat API: connections, endpoints, attempts, SSE, pacing."""

from worker.upstream.attempts import Attempt
from worker.upstream.client import Timeouts, attempt, make_session
from worker.upstream.connections import UpstreamSession
from worker.upstream.endpoints import Endpoints, endpoint_label
from worker.upstream.pacing import Pacer

__all__ = [
    "Attempt",
    "Endpoints",
    "Pacer",
    "Timeouts",
    "UpstreamSession",
    "attempt",
    "endpoint_label",
    "make_session",
]
