"""`python -m bench.tap`: a TCP proxy that notes when each marked word leaves the upstream.

Words shaped like `s012w034` (stream 12, token 34) are looked for in the bytes flowing from
the upstream to the client; the first time each is forwarded, its time.monotonic() is
kept. On SIGTERM the stamps are written as JSON to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import time
from pathlib import Path

WORD = re.compile(rb"s\d{3}w\d{3}")
TAIL_BYTES = 16


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stamps: dict[str, float] | None
) -> None:
    tail = b""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            if stamps is not None:
                now = time.monotonic()
                buf = tail + data
                for match in WORD.finditer(buf):
                    stamps.setdefault(match.group().decode(), now)
                tail = buf[-TAIL_BYTES:]
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


def _handler(host: str, port: int, stamps: dict[str, float]):  # type: ignore[no-untyped-def]
    async def handle(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        u_reader, u_writer = await asyncio.open_connection(host, port)
        await asyncio.gather(_pipe(c_reader, u_writer, None), _pipe(u_reader, c_writer, stamps))

    return handle


async def serve(args: argparse.Namespace) -> None:
    """Proxy until SIGTERM, then write the stamps."""
    stamps: dict[str, float] = {}
    host, _, port = args.target.rpartition(":")
    server = await asyncio.start_server(
        _handler(host, int(port), stamps), "127.0.0.1", args.port, backlog=4096
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()
    Path(args.out).write_text(json.dumps(stamps))


def main() -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--target", required=True, help="host:port of the upstream")
    parser.add_argument("--out", required=True)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
