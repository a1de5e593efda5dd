"""The fake OpenAI-compatible upstream: `python -m fakellm --host H --port P [--api-key K]
[--rpm N] [--tpm N]`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import resource
import signal
import textwrap

from fakellm.knobs import KNOB_HELP
from fakellm.ratelimit import RateLimits
from fakellm.server import serve


def knobs_help() -> str:
    """The knobs, one entry each with its meaning, default and an example, for --help."""
    lines = [
        "knobs, per request, in the model name: `fake` or `fake:knob=value,knob=value,...`",
        "",
    ]
    for name, (meaning, default, example) in KNOB_HELP.items():
        text = [*textwrap.wrap(meaning, 70), f"default: {default}; example: {example}"]
        labels = [name] + [""] * (len(text) - 1)
        lines += [f"  {label:<12} {line}" for label, line in zip(labels, text, strict=True)]
    return "\n".join(lines)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fakellm",
        description=__doc__,
        epilog=knobs_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=9100, help="port to listen on (0: any)")
    parser.add_argument("--api-key", default=None, help="require `Authorization: Bearer KEY`")
    parser.add_argument(
        "--rpm",
        type=int,
        default=_env_int("FAKELLM_RPM"),
        help="requests per minute, then 429 (0: no limit; env FAKELLM_RPM)",
    )
    parser.add_argument(
        "--tpm",
        type=int,
        default=_env_int("FAKELLM_TPM"),
        help="tokens per minute: prompt words + max_tokens (or 1024), then 429 "
        "(0: no limit; env FAKELLM_TPM)",
    )
    parser.add_argument(
        "--limit-window",
        type=float,
        default=60.0,
        help="seconds in which the limits refill: a shorter 'minute' for tests",
    )
    return parser.parse_args(argv)


def _env_int(name: str) -> int:
    return int(os.environ.get(name, "0") or 0)


def _raise_open_files_limit() -> None:
    # Thousands of concurrent streams need as many file descriptors.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def _main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    limits = RateLimits(args.rpm, args.tpm, args.limit_window)
    await serve(args.host, args.port, args.api_key, limits, stop)


def main(argv: list[str] | None = None) -> None:
    """Run the fake upstream until SIGINT or SIGTERM."""
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    _raise_open_files_limit()
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
