"""Running jobs: the runner, the monitor, the relay."""

from worker.run.monitor import Monitor
from worker.run.relay import HANDLERS, Relay, handler
from worker.run.runner import run_job

__all__ = ["HANDLERS", "Monitor", "Relay", "handler", "run_job"]
