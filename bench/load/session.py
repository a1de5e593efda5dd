"""The aiohttp client session of the load generator, and the open-files limit it needs."""

from __future__ import annotations

import contextlib
import resource

import aiohttp


def raise_open_files_limit() -> int:
    """Lift the soft open-files limit to the hard one (20,000 here); answer the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def client_session(
    timeout_s: float, trace: aiohttp.TraceConfig | None = None
) -> aiohttp.ClientSession:
    """A session with no connection cap (one connection per concurrent request)."""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60)
    timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=30)
    traces = [trace] if trace else []
    return aiohttp.ClientSession(connector=connector, timeout=timeout, trace_configs=traces)
