"""The jobs a worker process holds: their handles, the running set, their text flushed to the
store, and the store steps retried through an outage."""

from worker.jobs.flusher import DeltaWriter, Flusher
from worker.jobs.persisting import persist
from worker.jobs.running import CANCELLED, LOST, TIMEOUT, Handle, Registry, calling_handle

__all__ = [
    "CANCELLED",
    "LOST",
    "TIMEOUT",
    "DeltaWriter",
    "Flusher",
    "Handle",
    "Registry",
    "calling_handle",
    "persist",
]
