"""Starting and stopping the real processes the tests talk to."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import requests

from scripts.localredis import free_port

ROOT = Path(__file__).resolve().parents[1]
# One folder per test session, so that the secrets check reads only its own logs. A program a
# test runs (the bench smoke test's `python -m bench`) inherits it, so its processes' logs are
# checked too.
LOG_DIR = Path(
    os.environ.setdefault("CHATQ_TEST_LOG_DIR", str(ROOT / ".run" / "test-logs" / str(os.getpid())))
)


def wait_until(
    check: Callable[[], Any],
    timeout_s: float,
    what: str,
    every_s: float = 0.05,
    log: Proc | None = None,
) -> Any:
    """Poll `check` until it returns something truthy; fail after `timeout_s`, with the end of
    `log`'s log if given."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = check()
        except (requests.RequestException, OSError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            ending = f"; {_log_end(log)}" if log else ""
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}{ending}")
        time.sleep(every_s)


def _die_with_parent() -> None:
    """In the child: be killed if the test run itself dies (no orphans left behind)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


class Proc:
    """One child process (`python -m NAME …`) with its output in a log file."""

    def __init__(
        self, name: str, args: list[str], env: dict[str, str], prefix: Sequence[str] = ()
    ) -> None:
        """`prefix` runs it through another program (`ip netns exec NS`: on another host)."""
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = LOG_DIR / f"{name}-{os.getpid()}-{time.monotonic_ns()}.log"
        self.args = [*prefix, sys.executable, "-m", *args]
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        """Start it."""
        log = open(self.log_path, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            self.args,
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        """Send `sig` to this process only."""
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL of its whole process group if it lingers."""
        stop_all([self], timeout_s)

    def kill(self) -> None:
        """SIGKILL, no goodbye."""
        if self.alive():
            os.killpg(self.pid, signal.SIGKILL)
            assert self.process is not None
            self.process.wait(5)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def stop_all(procs: Sequence[Proc], timeout_s: float = 5.0) -> None:
    """SIGTERM to all of `procs` at once, then SIGKILL to what is left of their process groups
    `timeout_s` later (one after another, each would wait its own grace)."""
    running = [p for p in procs if p.alive()]
    for proc in running:
        proc.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for proc in running:
        assert proc.process is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.process.wait(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.process is None:
            continue
        # The whole group: what a wrapper (`faketime`, `ip netns exec`) started may outlive it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.process.wait(5)


def base_env(redis_url: str, upstream_url: str, **overrides: str) -> dict[str, str]:
    """The environment of a chatq process under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATQ_")}
    env.update(
        CHATQ_REDIS_URL=redis_url,
        CHATQ_UPSTREAM_URLS=upstream_url,
        CHATQ_UPSTREAM_API_KEY=UPSTREAM_KEY,
        CHATQ_API_KEYS=f"alice:{ALICE_KEY},bob:{BOB_KEY}",
        # alice sees the whole of GET /v1/queue; bob (and any other key) sees its own share.
        CHATQ_ADMIN_KEYS="alice",
        CHATQ_METRICS_TOKEN=METRICS_TOKEN,
        CHATQ_DEFAULT_MODEL="fake",
        CHATQ_LOG_LEVEL="INFO",
        # Idle keep-alive connections would hold a stopping web for the whole grace period.
        CHATQ_GRACEFUL_TIMEOUT="2",
        # Webhook receivers of the tests (and the docs') listen on loopback.
        CHATQ_WEBHOOK_ALLOW_PRIVATE="1",
        # Uploaded and batch files go with the session's logs (removed after a clean run).
        CHATQ_FILES_DIR=str(LOG_DIR / "files"),
        PYTHONUNBUFFERED="1",
    )
    env.update(overrides)
    if "CHATQ_ADMIN_KEYS" not in overrides and "alice" not in key_names(env["CHATQ_API_KEYS"]):
        del env["CHATQ_ADMIN_KEYS"]  # keys of a test's own: no admin unless it names one
    return env


def key_names(api_keys: str) -> set[str]:
    """The names of the keys of a CHATQ_API_KEYS value."""
    from chatq.config.settings import parse_api_keys

    return {name for name, _ in parse_api_keys(api_keys)}


# Test-only keys; the session fails if one appears in any log (tests/conftest.py).
ALICE_KEY = "sk-test-alice-0f3a9c5e7b21"
BOB_KEY = "sk-test-bob-77d1e04c9a6f"
UPSTREAM_KEY = "sk-test-upstream-5be2c8a41d93"
METRICS_TOKEN = "test-metrics-token-9e04b7c2a815"
TEST_KEYS = {"alice": ALICE_KEY, "bob": BOB_KEY, "upstream": UPSTREAM_KEY, "metrics": METRICS_TOKEN}
# What a scrape sends to read every series, those that name a key too.
METRICS_AUTH = {"Authorization": f"Bearer {METRICS_TOKEN}"}


def leaked_keys(log_dir: Path) -> list[tuple[Path, str]]:
    """(log file, key name) for every test key found in a log of `log_dir`."""
    logs = sorted(log_dir.glob("*.log")) if log_dir.is_dir() else []
    leaks = []
    for path in logs:
        text = path.read_text(errors="replace")
        leaks += [(path, name) for name, key in TEST_KEYS.items() if key in text]
    return leaks


def start_fakellm(
    *extra: str, host: str = "127.0.0.1", prefix: Sequence[str] = ()
) -> tuple[Proc, str]:
    """A fakellm process checking the upstream key, `extra` added to its command line (such
    as `--rpm 600`); answers (process, base URL)."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = ["fakellm", "--host", host, "--port", str(port), "--api-key", UPSTREAM_KEY, *extra]
    proc = Proc("fakellm", args, env, prefix).start()
    url = f"http://{host}:{port}"
    wait_started(proc, lambda: requests.get(url + "/stats", timeout=1).ok, 15)
    return proc, url + "/v1"


def start_web(
    env: dict[str, str], host: str = "127.0.0.1", prefix: Sequence[str] = ()
) -> tuple[Proc, str]:
    """A `python -m web` process on a free port of `host`; answers (process, base URL)."""
    proc, url = launch_web(env, host, prefix)
    wait_web_up(proc, url)
    return proc, url


def launch_web(
    env: dict[str, str], host: str = "127.0.0.1", prefix: Sequence[str] = ()
) -> tuple[Proc, str]:
    """start_web without the wait: the caller waits (wait_web_up) once its other processes
    are starting too."""
    port = free_port()
    proc = Proc("web", ["web"], {**env, "CHATQ_BIND": f"{host}:{port}"}, prefix).start()
    return proc, f"http://{host}:{port}"


def start_worker(env: dict[str, str], redis_url: str, prefix: Sequence[str] = ()) -> Proc:
    """A `python -m worker` process; returns once it consumes its queues."""
    proc = launch_worker(env, prefix)
    wait_worker_ready(proc)
    return proc


def launch_worker(env: dict[str, str], prefix: Sequence[str] = ()) -> Proc:
    """start_worker without the wait (wait_worker_ready)."""
    env = {"CHATQ_WORKER_METRICS_BIND": f"127.0.0.1:{free_port()}", **env}
    return Proc("worker", ["worker"], env, prefix).start()


def wait_worker_ready(proc: Proc) -> None:
    """Wait until the worker `proc` consumes its queues (Celery logs "ready.")."""
    wait_started(proc, lambda: "ready." in proc.log_text(), 20)


def wait_web_up(proc: Proc, url: str) -> None:
    """Wait until the web `proc` answers its health check at `url`."""
    wait_started(proc, lambda: requests.get(url + "/healthz", timeout=1).ok, 20)


def wait_started(proc: Proc, check: Callable[[], Any], timeout_s: float) -> None:
    """Wait until `check` says `proc` is up; fail at once if it exits first, and with the end
    of its log either way."""

    def up_or_gone() -> str:
        if check():
            return "up"
        return "" if proc.alive() else "gone"

    if wait_until(up_or_gone, timeout_s, f"{proc.name} to start", log=proc) == "gone":
        raise AssertionError(f"{proc.name} exited while starting; {_log_end(proc)}")


def _log_end(proc: Proc) -> str:
    """The last lines of `proc`'s log, for a failure's message."""
    return "its log ends:\n" + proc.log_text()[-2000:]


def longpoll_waiters(url: str) -> int:
    """Requests parked in the web at `url` now (its gauge chatq_longpoll_waiters)."""
    for line in requests.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("chatq_longpoll_waiters "):
            return int(float(line.split()[1]))
    return 0


def leases_count(client: Any) -> int:
    """Jobs holding a lease, in every shard (chatq/keys.py)."""
    from chatq import keys

    return sum(int(client.zcard(keys.leases(shard))) for shard in keys.SHARDS)


def wait_swept(client: Any, job_ids: Sequence[str], looks: int, timeout_s: float = 30) -> None:
    """Wait until the sweeper has looked `looks` more times at each of the queued `job_ids`:
    each look pushes the job's lease one resend period ahead (chatq/jobs/sweep.lua), so a
    change of its score is one look, and no two looks come within one poll."""
    from chatq import keys

    def scores() -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.zscore(keys.leases_of(job_id), job_id)
        return list(pipe.execute())

    last, seen = scores(), [0] * len(job_ids)

    def looked() -> bool:
        for i, score in enumerate(scores()):
            if score != last[i]:
                last[i], seen[i] = score, seen[i] + 1
        return min(seen) >= looks

    what = f"the sweeper's {looks} looks at each of {len(job_ids)} queued jobs"
    wait_until(looked, timeout_s, what, every_s=0.1)


def outbox_length(client: Any) -> int:
    """Entries waiting in the outbox, in every shard and lane."""
    from chatq import keys
    from chatq.jobs import record as jobs

    return sum(int(client.xlen(stream)) for stream in keys.outboxes(jobs.PRIORITIES))


def sse_events(session: requests.Session, url: str) -> list[dict[str, Any]]:
    """Every event of a job's Server-Sent Events stream at `url`, read to its end."""
    with session.get(url, stream=True, timeout=20, headers={"Accept": "text/event-stream"}) as sse:
        return [
            json.loads(line[6:])
            for line in sse.iter_lines(decode_unicode=True)
            if line.startswith("data: ")
        ]


def python_output(code: str) -> str:
    """What `python -c code` prints, run from the repository in a process of its own; its
    stderr in the assertion message when it fails."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
