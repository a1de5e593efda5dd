"""Interleaved windows for issue 16's latency check: the batch worker paused (SIGSTOP) and
resumed (SIGCONT) in turns while the interactive probe runs throughout, so that probes beside
the running batch and probes of the same system idle are taken minutes, not a whole run,
apart; a machine whose speed drifts (a VM's neighbours, a slow minute) moves both alike."""

from __future__ import annotations

import bisect
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.sections.common import JSON
from bench.stats import summary_ms

# A turn's length is well under the lease the bench gives the batch worker (PAUSABLE_LEASE_S):
# its running lines are not taken over while it is paused.
PAUSABLE_LEASE_S = 60
# Probes started this soon after a switch belong to neither side: the upstream calls the
# paused worker had made still end, and the resumed one first reads what waited for it.
SETTLE_SHARE = 0.15


def take_turns(pid: int, total_s: float, turn_s: float) -> list[tuple[float, bool]]:
    """Pause and resume process `pid` every `turn_s` for `total_s`, from running; each
    switch as (time.monotonic(), running after it). It is left running."""
    switches, running = [(time.monotonic(), True)], True
    end = time.monotonic() + total_s
    try:
        while time.monotonic() < end - turn_s / 2:
            time.sleep(min(turn_s, max(0.0, end - time.monotonic())))
            running = not running
            os.kill(pid, signal.SIGCONT if running else signal.SIGSTOP)
            switches.append((time.monotonic(), running))
        if not running:  # the last turn paused: its end is a switch too
            os.kill(pid, signal.SIGCONT)
            switches.append((time.monotonic(), True))
    finally:
        os.kill(pid, signal.SIGCONT)
    return switches


def split(outcomes: list[JSON], switches: list[tuple[float, bool]], turn_s: float) -> JSON:
    """The probes' latencies by the turn they ran in, whole: {"running", "paused"} summaries
    and the probes left out (started too soon after a switch, or ending after the next)."""
    times = [t for t, _ in switches]
    sides: dict[bool, list[float]] = {True: [], False: []}
    left_out = 0
    for o in outcomes:
        i = bisect.bisect_right(times, o["t0"]) - 1
        next_t = times[i + 1] if i + 1 < len(times) else float("inf")
        if not o["ok"] or i < 0 or o["t0"] - times[i] < SETTLE_SHARE * turn_s or o["t1"] > next_t:
            left_out += 1
            continue
        sides[switches[i][1]].append(o["t1"] - o["t0"])
    paused_s = sum(b - a for (a, running), (b, _) in itertools.pairwise(switches) if not running)
    return {
        "paused_s": round(paused_s, 1),
        "running": {"latency": summary_ms(sides[True])},
        "paused": {"latency": summary_ms(sides[False])},
        "left_out": left_out,
        "errors": sum(1 for o in outcomes if not o["ok"]),
    }


@contextmanager
def cpu_burner() -> Iterator[int]:
    """A process in Linux's idle class that spins on one core and touches nothing else: the
    control for the batch worker in the same class. Yields its pid."""
    spin = [sys.executable, "-c", "while True: pass"]
    proc = subprocess.Popen(["chrt", "--idle", "0", *spin])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)
