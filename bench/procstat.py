"""CPU time and memory of the processes under test, read with psutil."""

from __future__ import annotations

import time

import psutil


def _tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants that are alive now."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds used so far by `pid` and its live descendants."""
    total = 0.0
    for proc in _tree(pid):
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def rss_bytes(pid: int) -> int:
    """The largest resident set among `pid` and its descendants (gunicorn's worker, say)."""
    sizes = []
    for proc in _tree(pid):
        try:
            sizes.append(proc.memory_info().rss)
        except psutil.NoSuchProcess:
            continue
    return max(sizes, default=0)


def serving_pid(pid: int) -> int:
    """The pid that does the work: the single child of a pre-forking master, else `pid`."""
    tree = _tree(pid)
    return tree[-1].pid if len(tree) == 2 else pid


def cpu_percent_over(pid: int, window_s: float) -> float:
    """CPU use of `pid`'s tree over the next `window_s`, in percent of one core."""
    before = cpu_seconds(pid)
    time.sleep(window_s)
    return 100 * (cpu_seconds(pid) - before) / window_s


def wait_idle(
    pid: int, below_pct: float = 8.0, window_s: float = 0.3, timeout_s: float = 60.0
) -> float:
    """Block until `pid` uses less than `below_pct` of a core over a window; seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if cpu_percent_over(pid, window_s) < below_pct:
            break
    return time.monotonic() - start


class CpuMeter:
    """CPU seconds used by named processes between `start` and `stop`."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._before: dict[str, float] = {}
        self._t0 = 0.0

    def start(self) -> CpuMeter:
        """Take the first reading."""
        self._before = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        self._t0 = time.monotonic()
        return self

    def stop(self) -> dict[str, dict[str, float]]:
        """CPU seconds and percent of one core per process since `start`."""
        wall_s = max(time.monotonic() - self._t0, 1e-9)
        out = {}
        for name, pid in self.pids.items():
            used = cpu_seconds(pid) - self._before.get(name, 0.0)
            out[name] = {"cpu_s": round(used, 3), "cpu_pct": round(100 * used / wall_s, 1)}
        return out
