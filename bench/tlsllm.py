"""`python -m bench.tlsllm`: fakellm's own server, served over TLS with a given certificate."""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl

from aiohttp import web

from fakellm.server import FakeLLM, make_server


async def serve(args: argparse.Namespace) -> None:
    """Serve fakellm over HTTPS until SIGTERM."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert)
    runner = web.ServerRunner(make_server(FakeLLM(args.api_key)), shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, ssl_context=context, backlog=4096)
    await site.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main() -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True, help="PEM with the key and the chain")
    parser.add_argument("--api-key", default=None)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
