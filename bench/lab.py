"""What the sections share within one run: fakellm, chatq stacks, the other processes."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from bench.profiling import recording
from bench.sizes import Sizes
from bench.stack import ChatqStack, start_chatq
from scripts.localredis import LocalRedis, free_port
from tests.procs import Proc, start_fakellm, wait_until

# The main stack: enough worker slots for the 1 s upstream, jobs that outlive every section,
# and no cap on the requests one key holds open (every section's clients share one key).
MAIN_ENV = {
    "CHATQ_WORKER_CONCURRENCY": "300",
    "CHATQ_JOB_TTL": "600",
    "CHATQ_MAX_HELD_REQUESTS_PER_KEY": "0",
}
Recipe = tuple[str, dict[str, Any]]


class Lab:
    """Starts shared processes on first use (or ahead, with `prestart`) and stops them all."""

    def __init__(self, sizes: Sizes, profile_dir: Path | None = None) -> None:
        self.sizes = sizes
        self.profile_dir = profile_dir
        self.tmp = Path(tempfile.mkdtemp(prefix="chatq-bench-"))
        self._lock = threading.RLock()
        self._pool = ThreadPoolExecutor(2)
        self._fakellms: dict[str, tuple[Proc, str]] = {}
        self._stacks: dict[str, Future[ChatqStack]] = {}
        self._procs: list[Proc] = []
        self._redises: list[LocalRedis] = []
        self._tap: tuple[Proc, str] | None = None

    def profiled(self, tag: str, pids: dict[str, int]) -> AbstractContextManager[None]:
        """A py-spy recording of `pids` around a block, when the run was asked to profile."""
        return recording(self.profile_dir, tag, pids)

    def fakellm(self, name: str = "shared") -> str:
        """The base URL (…/v1) of the fakellm called `name` (the main stack has its own)."""
        with self._lock:
            if name not in self._fakellms:
                self._fakellms[name] = start_fakellm()
            return self._fakellms[name][1]

    def fakellm_pid(self, name: str = "shared") -> int:
        """That fakellm's pid."""
        self.fakellm(name)
        return self._fakellms[name][0].pid

    def fakellm_stats(self, name: str = "shared", reset: bool = False) -> dict[str, int]:
        """That fakellm's /stats (its counters zeroed first with `reset`)."""
        root = self.fakellm(name).removesuffix("/v1")
        if reset:
            requests.post(root + "/stats/reset", timeout=5).raise_for_status()
        return dict(requests.get(root + "/stats", timeout=5).json())

    def tap(self) -> tuple[Proc, str]:
        """The stamping proxy in front of the shared fakellm: (process, its …/v1 URL)."""
        with self._lock:
            if self._tap is None:
                self._tap = self._start_tap()
            return self._tap

    def _start_tap(self) -> tuple[Proc, str]:
        upstream = urlsplit(self.fakellm())
        port = free_port()
        args = [
            "bench.tap",
            "--port",
            str(port),
            "--target",
            str(upstream.netloc),
            "--out",
            str(self.tap_file),
        ]
        proc = self.track(Proc("tap", args, dict(os.environ)).start())
        wait_until(
            lambda: socket.create_connection(("127.0.0.1", port), 1).close() or True, 10, "tap"
        )
        return proc, f"http://127.0.0.1:{port}/v1"

    @property
    def tap_file(self) -> Path:
        """Where the tap writes its stamps when stopped."""
        return self.tmp / "tap.json"

    def _start(
        self, name: str, upstream: str | None, workers: int, env: dict[str, str]
    ) -> ChatqStack:
        if upstream == "tap":
            upstream = self.tap()[1]
        default = self.fakellm("main" if name == "main" else "shared")
        return start_chatq(upstream or default, workers, **{**MAIN_ENV, **env})

    def chatq(
        self, name: str = "main", upstream: str | None = None, workers: int = 1, **env: str
    ) -> ChatqStack:
        """The chatq stack called `name` (`env` over MAIN_ENV), started on first use."""
        with self._lock:
            if name not in self._stacks:
                self._stacks[name] = self._pool.submit(self._start, name, upstream, workers, env)
            future = self._stacks[name]
        return future.result()

    def prestart(self, recipes: list[Recipe]) -> None:
        """Start these stacks in the background now (short runs, where start-up dominates)."""
        for name, kwargs in recipes:
            with self._lock:
                if name not in self._stacks:
                    self._stacks[name] = self._pool.submit(
                        self._start,
                        name,
                        kwargs.get("upstream"),
                        kwargs.get("workers", 1),
                        {k: v for k, v in kwargs.items() if k.startswith("CHATQ_")},
                    )

    def drop(self, name: str) -> None:
        """Stop a stack that no later section needs."""
        with self._lock:
            future = self._stacks.pop(name, None)
        if future is not None and future.exception() is None:
            future.result().stop()

    def redis(self) -> LocalRedis:
        """A fresh Redis of its own, stopped at the end."""
        server = LocalRedis().start()
        self._redises.append(server)
        return server

    def track(self, proc: Proc) -> Proc:
        """Stop `proc` at the end of the run."""
        self._procs.append(proc)
        return proc

    def close(self) -> None:
        """Stop everything started here, newest first."""
        for name in list(self._stacks):
            self.drop(name)
        for proc in reversed(self._procs):
            proc.stop()
        for server in self._redises:
            server.stop()
        for proc, _ in self._fakellms.values():
            proc.stop()
        self._pool.shutdown()
        shutil.rmtree(self.tmp, ignore_errors=True)
