"""How a process runs: logs, offloading, garbage collection, tallies, heartbeats."""

from chatq.runtime.collector import collect_on_a_clock
from chatq.runtime.heartbeats import live_count, parse
from chatq.runtime.logs import Redactor, setup
from chatq.runtime.offload import blocking, gevent_process, off_loop, on_fresh_stack
from chatq.runtime.tally import Tally

__all__ = [
    "Redactor",
    "Tally",
    "blocking",
    "collect_on_a_clock",
    "gevent_process",
    "live_count",
    "off_loop",
    "on_fresh_stack",
    "parse",
    "setup",
]
