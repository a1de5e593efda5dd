"""The processes `make up` starts, their output behind their names, and the ports they take."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
_say_lock = threading.Lock()


class UpError(RuntimeError):
    """Something could not start, or stopped by itself; the message says what."""


def say(line: str) -> None:
    """Print one line whole, never interleaved with a child's."""
    with _say_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


@dataclass
class Child:
    """A process started here, its output copied to the terminal behind its name."""

    name: str
    process: subprocess.Popen[bytes]
    ready_text: str = ""
    ready: threading.Event = field(default_factory=threading.Event)
    pump: threading.Thread | None = None


def _pump(child: Child, stream: IO[bytes]) -> None:
    """Copy a child's output line by line, noting when it says it is ready."""
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip()
        if child.ready_text and child.ready_text in line:
            child.ready.set()
        say(f"{child.name:>7} | {line}")


def spawn(name: str, args: list[str], env: dict[str, str], ready_text: str = "") -> Child:
    """Start `python -m ARGS` in its own session, so that a terminal's Ctrl-C reaches us only."""
    process = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    child = Child(name, process, ready_text)
    assert process.stdout is not None
    child.pump = threading.Thread(target=_pump, args=(child, process.stdout), daemon=True)
    child.pump.start()
    return child


def bindable(host: str, port: int) -> bool:
    """Whether a server could listen at host:port now (nothing else is bound there)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def healthy(url: str) -> bool:
    """Whether the web at `url` answers /healthz with 200."""
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=1) as response:
            return int(response.status) == 200
    except (OSError, http.client.HTTPException):
        return False


def bind_address(bind: str, setting: str = "CHATQ_BIND") -> tuple[str, int]:
    """The (host, port) to reach a `host:port` setting from this machine."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    try:
        return host, int(port)
    except ValueError as exc:
        raise UpError(f"{setting} must be host:port, got {bind!r}") from exc


def check_free(env: dict[str, str], setting: str) -> tuple[str, int]:
    """The (host, port) of the `host:port` in env[setting]; UpError if something holds it."""
    host, port = bind_address(env[setting], setting)
    if not bindable(host, port):
        raise UpError(f"{host}:{port} ({setting}) is taken: set {setting} to a free host:port")
    return host, port
