"""PNG plots of one run (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from bench.rows import dig

JSON = dict[str, Any]


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def compare_plot(s: JSON, path: Path) -> Path | None:
    """Added latency (p50 solid, p99 dashed) against concurrency, per alternative."""
    systems = dig(s, "compare", "systems")
    if not systems:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, sys_ in systems.items():
        xs = [lv["clients"] for lv in sys_["levels"]]
        (line,) = ax.plot(xs, [lv["latency"]["p50_ms"] for lv in sys_["levels"]], "o-", label=name)
        ax.plot(
            xs, [lv["latency"]["p99_ms"] for lv in sys_["levels"]], "--", color=line.get_color()
        )
    _log_axes(ax, "concurrent clients (1 s jobs)", "added latency, ms (p50 —, p99 --)")
    ax.set_title("Added latency per job against concurrency")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _log_axes(ax: Axes, xlabel: str, ylabel: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)


def wake_plot(s: JSON, path: Path) -> Path | None:
    """Wake latency p50/p99 against the number of parked waiters, chatq and gthread."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn = False
    for name, label in (
        ("waiters", "chatq (gevent, 1 process)"),
        ("gthread", "Flask+Celery gthread(64)"),
    ):
        levels = dig(s, name, "levels") or []
        pts = [lv for lv in levels if lv["wake"]["p50_ms"] is not None]
        if not pts:
            continue
        drawn = True
        xs = [lv["waiters"] + lv["probes"] for lv in pts]
        (line,) = ax.plot(xs, [lv["wake"]["p50_ms"] for lv in pts], "o-", label=f"{label} p50")
        ax.plot(
            xs,
            [lv["wake"]["p99_ms"] for lv in pts],
            "s--",
            color=line.get_color(),
            label=f"{label} p99",
        )
        ax.plot(
            xs,
            [lv["probe"]["wake"]["p99_ms"] for lv in pts],
            "x:",
            color=line.get_color(),
            label=f"{label} probe p99",
        )
    if not drawn:
        plt.close(fig)
        return None
    _log_axes(ax, "parked waiters in one process", "wake latency, ms")
    ax.set_title("Completion in Redis → waiting client answered")
    ax.legend(fontsize=7)
    return _save(fig, path)


def scaling_plot(s: JSON, path: Path) -> Path | None:
    """Client latency against arrival rate: direct, through chatq, through LiteLLM."""
    points = dig(s, "gateway", "points")
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for who, marker, colour in (
        ("direct", "s", "C7"),
        ("chatq", "o", "C0"),
        ("litellm", "^", "C1"),
    ):
        ran = [p for p in points if who in p]
        if not ran:
            continue
        xs = [p["rate_per_s"] for p in ran]
        for q, line in (("p50_ms", "-"), ("p99_ms", "--")):
            ys = [p[who]["latency"][q] for p in ran]
            ax.plot(xs, ys, marker + line, color=colour, label=f"{who} {q.split('_')[0]}")
    ax.set_yscale("log")
    ax.set_xlabel("arrivals per second (Poisson), instant upstream")
    ax.set_ylabel("client latency, ms")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("POST /v1/chat/completions: direct, through chatq, through LiteLLM")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _throughput_bars(t: JSON) -> list[tuple[str, float, str]]:
    """(label, jobs/s, colour) for each throughput figure of a run."""
    bars = [
        ("chatq instant (gevent)", t["instant"]["jobs_per_s"], "C0"),
        ("chatq 1 s stream", t["streaming_1s"]["jobs_per_s"], "C0"),
    ]
    if t.get("instant_threads_pool"):
        bars.append(("chatq instant (threads)", t["instant_threads_pool"]["jobs_per_s"], "C0"))
    for b in t["bare_celery"]:
        colour = "C7" if b["settings"] == "plain" else "C1"
        bars.append(
            (f"bare Celery {b['settings']} {b['pool']} x{b['slots']}", b["jobs_per_s"], colour)
        )
    return bars


def throughput_plot(s: JSON, path: Path) -> Path | None:
    """Jobs/s: chatq (instant, 1 s streaming) against bare Celery, with the 60 % line."""
    t = dig(s, "throughput")
    if not t:
        return None
    bars = _throughput_bars(t)
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(bars) + 1.4))
    ax.barh([b[0] for b in bars], [b[1] or 0 for b in bars], color=[b[2] for b in bars])
    for i, (_, value, _) in enumerate(bars):
        ax.text(value or 0, i, f" {value}", va="center", fontsize=8)
    same = t.get("bare_celery_same_pool")
    if same:
        ax.axvline(
            0.6 * same["jobs_per_s"],
            color="C3",
            linestyle=":",
            label=f"60 % of bare Celery on chatq's pool ({same['pool']})",
        )
    ax.set_xlabel("jobs per second (1 web + 1 worker process; bare Celery: 1 worker)")
    ax.set_title("Throughput on 2 cores")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def all_plots(s: JSON, folder: Path) -> list[Path]:
    """Every plot that the run has figures for."""
    folder.mkdir(parents=True, exist_ok=True)
    made = [
        compare_plot(s, folder / "compare.png"),
        wake_plot(s, folder / "wake.png"),
        scaling_plot(s, folder / "scaling.png"),
        throughput_plot(s, folder / "throughput.png"),
    ]
    return [p for p in made if p is not None]
