"""py-spy profiles of the processes under test, summarised to where the time goes."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PY_SPY = Path(sys.executable).with_name("py-spy")


def start_record(pid: int, out: Path, duration_s: int, rate: int = 200) -> subprocess.Popen[bytes]:
    """`py-spy record --format raw` of `pid` and its subprocesses for `duration_s`."""
    args = [
        str(PY_SPY),
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(duration_s),
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--output",
        str(out),
        "--subprocesses",
        "--nonblocking",
    ]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _frame_name(frame: str) -> str:
    """`func (path/file.py:line)` -> `func (file.py)`, short enough for a table."""
    if frame.startswith("process "):  # py-spy's root frame: pid and command line, path dropped
        pid, _, line = frame.partition(":")
        command = line.strip('"').split()
        return f"{pid} (" + " ".join([Path(command[0]).name, *command[1:]] if command else []) + ")"
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    short = (
        "/".join(path.split("/")[-2:])
        if "site-packages" not in path
        else path.split("site-packages/")[-1]
    )
    return f"{name} ({short})"


def read_raw(path: Path) -> list[tuple[list[str], int]]:
    """The stacks of a raw (collapsed) profile: root-first frames and sample counts."""
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        frames, _, count = line.rpartition(" ")
        if frames and count.isdigit():
            stacks.append(([_frame_name(f) for f in frames.split(";")], int(count)))
    return stacks


def summarise(path: Path, top: int = 15) -> dict[str, list[tuple[str, float]]]:
    """Top functions by self and by inclusive share of samples, in percent."""
    stacks = read_raw(path)
    total = sum(c for _, c in stacks) or 1
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for frames, count in stacks:
        own[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    pct = lambda c: round(100 * c / total, 1)  # noqa: E731
    return {
        "samples": [("total", float(total))],
        "self": [(n, pct(c)) for n, c in own.most_common(top)],
        "inclusive": [(n, pct(c)) for n, c in inclusive.most_common(top)],
    }


def render(summary: dict[str, list[tuple[str, float]]]) -> str:
    """A plain-text rendering of a summary."""
    lines = [f"samples: {int(summary['samples'][0][1])}"]
    for part in ("self", "inclusive"):
        lines.append(f"-- top by {part} time (% of samples)")
        lines += [f"{share:5.1f}%  {name}" for name, share in summary[part]]
    return "\n".join(lines)


@contextmanager
def recording(folder: Path | None, tag: str, pids: dict[str, int]) -> Iterator[None]:
    """py-spy on each of `pids` for the duration of the block (nothing when `folder` is None);
    then a summary per process, `folder/TAG-NAME.txt`, beside the raw profile."""
    if folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    raws = {name: folder / f"{tag}-{name}.raw" for name in pids}
    procs = [start_record(pid, raws[name], 900) for name, pid in pids.items()]
    try:
        yield
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            proc.wait(60)
        for name, raw in raws.items():
            if raw.exists():
                text = render(summarise(raw, 25))
                raw.with_suffix(".txt").write_text(f"{tag} / {name}\n{text}\n")
