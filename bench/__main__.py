"""`python -m bench [--quick] [--only NAME,...]`: run the benchmarks, write and print results."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench import meta, plots, report, soak_targets
from bench.lab import Lab
from bench.sections.registry import SECTIONS, stacks_of
from bench.sizes import FULL, QUICK
from bench.targets import evaluate

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run, ~1 min)")
    parser.add_argument("--only", default="", help=f"comma-separated of: {', '.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "latest.json")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the servers during the measurements (results/profiles/)",
    )
    parser.add_argument(
        "--readme",
        action="store_true",
        help="write bench/README.md and bench/plots even for a partial run",
    )
    parser.add_argument(
        "--soak",
        type=Path,
        action="append",
        default=[],
        help="a `make soak` result (JSON) to judge the soak targets by; "
        "may be given more than once",
    )
    return parser.parse_args(argv)


def selected(only: str) -> list[str]:
    """The section names to run, in registry order."""
    wanted = {n.strip() for n in only.split(",") if n.strip()}
    unknown = wanted - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown section(s): {', '.join(sorted(unknown))}")
    return [n for n in SECTIONS if not wanted or n in wanted]


def run_sections(lab: Lab, names: list[str]) -> dict[str, Any]:
    """Run each section; a failing section records its error and the run goes on."""
    out: dict[str, Any] = {}
    for name in names:
        print(f"[bench] {name} …", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            out[name] = SECTIONS[name](lab)
        except Exception as exc:  # a broken section must not lose the others' figures
            out[name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
        out[name]["elapsed_s"] = round(time.monotonic() - t0, 1)
        print(f"[bench] {name} done in {out[name]['elapsed_s']} s", file=sys.stderr, flush=True)
    return out


def header(m: dict[str, Any], elapsed_s: float) -> str:
    """Date, machine and command of a run, as Markdown."""
    return (
        f"Run {m['date']}, commit `{m['commit']}`: `{m['command']}` took {elapsed_s:.0f} s.\n"
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, Linux "
        f"{m['kernel']}, Python {m['python']}, open files {m['open_files_limit']}, "
        f"somaxconn {m['somaxconn']}. Load generator, servers and Redis share the 2 cores.\n"
    )


def update_readme(block: str, plot_paths: list[Path]) -> None:
    """Replace the results block of bench/README.md."""
    path = HERE / "README.md"
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    images = "\n".join(f"![{p.stem}](plots/{p.name})" for p in plot_paths)
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    path.write_text(text[:start] + "\n" + block + "\n" + images + "\n" + text[end:])


def _run(args: argparse.Namespace, names: list[str]) -> tuple[dict[str, Any], float]:
    """Run the sections, every process stopped afterwards; (sections, elapsed seconds)."""
    profiles = args.out.parent / "profiles" if args.profile else None
    lab = Lab(QUICK if args.quick else FULL, profiles)
    t0 = time.monotonic()
    if args.quick:  # start-up dominates a short run; a full run starts stacks one by one
        lab.prestart(stacks_of(names))
    try:
        return run_sections(lab, names), time.monotonic() - t0
    finally:
        lab.close()


def _publish(
    args: argparse.Namespace, info: dict[str, Any], sections: dict[str, Any], elapsed_s: float
) -> str:
    """Write the JSON, the plots and (full runs) the README; answer the Markdown block."""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": info, "sections": sections}, indent=1))
    fine = {name: s for name, s in sections.items() if "error" not in s}
    if args.soak:
        fine["soak"] = soak_targets.load(args.soak)
    rows = evaluate(fine)
    full = args.readme or (not args.quick and not args.only)
    plot_paths = plots.all_plots(fine, HERE / "plots" if full else args.out.parent / "plots")
    block = header(info, elapsed_s) + "\n" + report.markdown(rows, fine)
    args.out.write_text(
        json.dumps(
            {
                "meta": info,
                "elapsed_s": round(elapsed_s, 1),
                "targets": [r.as_dict() for r in rows],
                "sections": sections,
            },
            indent=1,
        )
    )
    if full:
        update_readme(block, plot_paths)
    return block


def main(argv: list[str] | None = None) -> int:
    """Run, then write JSON, plots and (full runs) the README; print the table."""
    args = parse_args(argv)
    names = selected(args.only)
    # SIGTERM unwinds like Ctrl-C, so that every process started here is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = (
        "python -m bench"
        + (" --quick" if args.quick else "")
        + (f" --only {args.only}" if args.only else "")
        + "".join(f" --soak {p.name}" for p in args.soak)
    )
    info = meta.describe(command)
    sections, elapsed_s = _run(args, names)
    print(_publish(args, info, sections, elapsed_s))
    failed = [n for n, s in sections.items() if "error" in s]
    for name in failed:
        print(f"[bench] section {name} failed: {sections[name]['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
