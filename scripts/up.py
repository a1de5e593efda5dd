"""`make up`: a whole chatq on this machine (Redis, fakellm, a worker, the web) and a key.

Only what is not given is started: the Redis at CHATQ_REDIS_URL is used when that is set, and
otherwise a throwaway Redis of its own (never one that merely answers on 6379: a shared Redis, or
another stack's, would mix its data with the demo's); fakellm stands in for the upstream only
while CHATQ_UPSTREAM_URLS is unset; uploaded files go to the clone's own `.run/files` unless
CHATQ_FILES_DIR says otherwise. Ports not given are picked free (the web's is 8000 when that is
free). Each child's output goes to this terminal behind its name. Ctrl-C or SIGTERM stops
everything started here; so does the death of any child.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

from scripts.children import (
    Child,
    UpError,
    bind_address,
    bindable,
    check_free,
    healthy,
    say,
    spawn,
)
from scripts.localredis import LocalRedis, answers, free_port

WEB_PORT = 8000
STOP_GRACE_S = 10.0
START_TIMEOUT_S = 30.0
FILES_DIR = Path(__file__).resolve().parent.parent / ".run" / "files"


def shown(url: str) -> str:
    """`url` without its user and password, fit to print."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def unset(env: dict[str, str], name: str) -> bool:
    """Whether `name` is unset or blank (chatq.config.settings reads blank as its default)."""
    return not env.get(name, "").strip()


@dataclass
class Stack:
    """Everything `make up` started, and the flag that asks it to stop."""

    env: dict[str, str]
    children: list[Child] = field(default_factory=list)
    redis: LocalRedis | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    generated_key: str = ""

    def wait_until(self, check: Callable[[], bool], what: str, required: bool = True) -> bool:
        """Poll `check` until it holds; give up on a stop request, a dead child or a timeout."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not check():
            if self.stopping.is_set():
                raise UpError(f"stopped while waiting for {what}")
            self.raise_if_one_died()
            if time.monotonic() > deadline:
                if required:
                    raise UpError(f"{what} not ready after {START_TIMEOUT_S:.0f} s")
                return False
            time.sleep(0.1)
        return True

    def raise_if_one_died(self) -> None:
        """Raise UpError naming the first child that has exited."""
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                pid = child.process.pid
                how = (
                    f"was killed by {signal.Signals(-code).name}"
                    if code < 0
                    else (f"exited with code {code}")
                )
                raise UpError(f"{child.name} (pid {pid}) {how}")

    def start_redis(self) -> None:
        """Use the Redis at CHATQ_REDIS_URL if set (it must answer), else start a throwaway one."""
        if not unset(self.env, "CHATQ_REDIS_URL"):
            url = self.env["CHATQ_REDIS_URL"].strip()
            if not answers(url):
                raise UpError(
                    f"no Redis answers at {shown(url)} (CHATQ_REDIS_URL); start it, or unset "
                    "CHATQ_REDIS_URL and make up starts a throwaway Redis of its own"
                )
            say(f"up: using the Redis at {shown(url)} (CHATQ_REDIS_URL)")
            return
        try:
            # Append-only: the demo's Redis keeps what it holds for as long as it runs, so
            # chatq has no cause to warn that it may lose jobs.
            self.redis = LocalRedis(appendonly=True).start()
        except RuntimeError as exc:
            raise UpError(str(exc)) from exc
        say(
            f"up: started a throwaway Redis at {self.redis.url} for this demo; its data goes "
            "when make up stops (set CHATQ_REDIS_URL to use a Redis of your own)"
        )
        self.env["CHATQ_REDIS_URL"] = self.redis.url

    def choose_files_dir(self) -> None:
        """Keep uploaded files in the clone's own run folder unless CHATQ_FILES_DIR is set."""
        if unset(self.env, "CHATQ_FILES_DIR"):
            self.env["CHATQ_FILES_DIR"] = str(FILES_DIR)
        say(f"up: uploaded files go to {self.env['CHATQ_FILES_DIR']} (CHATQ_FILES_DIR)")

    def start_fakellm(self) -> None:
        """Start fakellm on a free port as the upstream, unless CHATQ_UPSTREAM_URLS is set."""
        if not unset(self.env, "CHATQ_UPSTREAM_URLS"):
            say(f"up: upstream {self.env['CHATQ_UPSTREAM_URLS']} (CHATQ_UPSTREAM_URLS)")
            return
        port = free_port()
        args = ["fakellm", "--host", "127.0.0.1", "--port", str(port)]
        self.children.append(spawn("fakellm", args, self.env))
        self.wait_until(lambda: not bindable("127.0.0.1", port), "fakellm")
        self.env["CHATQ_UPSTREAM_URLS"] = f"http://127.0.0.1:{port}/v1"
        if unset(self.env, "CHATQ_DEFAULT_MODEL"):
            self.env["CHATQ_DEFAULT_MODEL"] = "fake"

    def ensure_key(self) -> None:
        """Make up a key named `demo` unless CHATQ_API_KEYS is set; let webhooks reach loopback."""
        if unset(self.env, "CHATQ_API_KEYS"):
            self.generated_key = secrets.token_urlsafe(24)
            self.env["CHATQ_API_KEYS"] = f"demo:{self.generated_key}"
        if unset(self.env, "CHATQ_WEBHOOK_ALLOW_PRIVATE"):
            # Everything of the demo is on this machine, the docs' webhook receiver too.
            self.env["CHATQ_WEBHOOK_ALLOW_PRIVATE"] = "1"

    def choose_ports(self) -> str:
        """Set the web's and the worker's addresses unless given; answer the web's base URL."""
        if unset(self.env, "CHATQ_BIND"):
            port = WEB_PORT if bindable("127.0.0.1", WEB_PORT) else free_port()
            if port != WEB_PORT:
                say(f"up: 127.0.0.1:{WEB_PORT} is taken; the web listens on 127.0.0.1:{port}")
            self.env["CHATQ_BIND"] = f"127.0.0.1:{port}"
        host, port = check_free(self.env, "CHATQ_BIND")
        # Empty means no metrics (chatq.config.settings); only a missing setting gets a free port.
        if "CHATQ_WORKER_METRICS_BIND" not in self.env:
            self.env["CHATQ_WORKER_METRICS_BIND"] = f"127.0.0.1:{free_port()}"
        if self.env["CHATQ_WORKER_METRICS_BIND"].strip():
            check_free(self.env, "CHATQ_WORKER_METRICS_BIND")
        return f"http://{host}:{port}"

    def metrics_url(self) -> str:
        """Where the worker serves its /metrics, or '' when it serves none."""
        bind = self.env.get("CHATQ_WORKER_METRICS_BIND", "").strip()
        if not bind:
            return ""
        host, port = bind_address(bind, "CHATQ_WORKER_METRICS_BIND")
        return f"http://{host}:{port}/metrics"

    def start_chatq(self, url: str) -> None:
        """Start the worker and the web at `url`; return once both are ready."""
        worker = spawn("worker", ["worker"], self.env, ready_text=" ready.")
        self.children.append(worker)
        self.children.append(spawn("web", ["web"], self.env))
        self.wait_until(lambda: healthy(url), f"the web at {url}/healthz")
        # Celery says "ready." at INFO only; below that level, go on without it.
        if not self.wait_until(worker.ready.is_set, "the worker", required=False):
            say("up: the worker has not said it is ready; jobs wait in the queue until it is")

    def watch(self) -> int:
        """Wait for a stop request (exit 0) or a child's death (exit 1)."""
        while not self.stopping.wait(0.2):
            try:
                self.raise_if_one_died()
            except UpError as exc:
                say(f"up: unexpectedly, {exc}; stopping the rest")
                return 1
        return 0

    def stop(self) -> None:
        """SIGTERM every child, wait, SIGKILL what is left of each; then stop our Redis."""
        alive = [c for c in reversed(self.children) if c.process.poll() is None]
        if alive:
            say("up: stopping " + ", ".join(f"{c.name} (pid {c.process.pid})" for c in alive))
        for child in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for child in reversed(self.children):
            self._reap(child, max(0.0, deadline - time.monotonic()))
        if self.redis is not None:
            self.redis.stop()
            say(f"up: stopped the Redis at {self.redis.url}")

    def _reap(self, child: Child, timeout_s: float) -> None:
        """Wait for `child`; SIGKILL it and its process group if it lingers."""
        try:
            child.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            say(f"up: {child.name} (pid {child.process.pid}) still running; killing it")
        # The group outlives a leader that left children behind (gunicorn's workers).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.process.pid, signal.SIGKILL)
        child.process.wait()
        if child.pump is not None:
            child.pump.join(1.0)


EXAMPLE_BODY = """-d '{"messages":[{"role":"user","content":"Hello"}]}'"""


def banner(url: str, key: str, metrics_url: str) -> str:
    """What to tell a newcomer once everything answers (docs/quickstart.md shows it)."""
    auth = '-H "Authorization: Bearer $KEY"'
    metrics = f", its worker's metrics at {metrics_url}" if metrics_url else ""
    key_line = f"KEY={key}" if key else "KEY=...   # one of the keys in your CHATQ_API_KEYS"
    return f"""
chatq is up: the web at {url}{metrics}.
In another shell:

  export URL={url} {key_line}

  # submit a job and wait up to 30 s for it to end (200 with the job, 202 if not yet)
  curl -s {auth} {EXAMPLE_BODY} "$URL/v1/jobs?wait=30"

  # the same request through the OpenAI-compatible front door
  curl -s {auth} {EXAMPLE_BODY} "$URL/v1/chat/completions"

Every example of README.md and docs/ runs after that export line; $URL/ is a chat page.
Ctrl-C stops everything started here.
"""


def main() -> int:
    """Start the stack, print how to use it, and run until told to stop or a child dies."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    stack = Stack(env)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stack.stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        url = stack.choose_ports()
        stack.start_redis()
        stack.choose_files_dir()
        stack.start_fakellm()
        stack.ensure_key()
        stack.start_chatq(url)
        say(banner(url, stack.generated_key, stack.metrics_url()))
        return stack.watch()
    except UpError as exc:
        say(f"up: {exc}")
        return 0 if stack.stopping.is_set() else 1
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
