"""How a process runs: logs, offloading, tallies, heartbeats."""

from chatq.runtime.heartbeats import live_count, parse
from chatq.runtime.logs import Redactor, setup
from chatq.runtime.offload import blocking, gevent_process, off_loop, on_fresh_stack
from chatq.runtime.tally import Tally

__all__ = [
    "Redactor",
    "Tally",
    "blocking",
    "gevent_process",
    "live_count",
    "off_loop",
    "on_fresh_stack",
    "parse",
    "setup",
]
