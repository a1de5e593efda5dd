"""The batch loop: validate, feed, settle and finalize each batch."""

from worker.batches.loop import start, stop

__all__ = ["start", "stop"]
