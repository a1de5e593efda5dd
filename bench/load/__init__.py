"""The load generator: asyncio + aiohttp, run as its own process (`python -m bench.load`)."""
