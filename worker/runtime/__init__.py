"""How a worker process runs under gevent: greenlets, the pool's poll."""

from worker.runtime.greenlets import install_greenlet_fix
from worker.runtime.pollfix import end_reads_within, install_pollfix
from worker.runtime.pool import tune_gevent_pool

__all__ = ["end_reads_within", "install_greenlet_fix", "install_pollfix", "tune_gevent_pool"]
