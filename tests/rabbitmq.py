"""A RabbitMQ node of the tests' own: its own node name, ports and data folder, so that a test
may kill and restart it without touching any other RabbitMQ on the machine; a vhost per test.

Needs Debian's `rabbitmq-server` package (installed, not necessarily running). The node runs
the management plugin (chatq reads the lanes' depths from it) and keeps its data in a
temporary folder that `stop` removes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from kombu import Connection

from chatq.broker import rabbitmq
from scripts.localredis import LocalRedis, free_port
from tests.conftest import Stack, start_stack
from tests.procs import LOG_DIR, Proc, start_fakellm, wait_until

SERVER_SCRIPTS = ("/usr/lib/rabbitmq/bin/rabbitmq-server", "/usr/lib/rabbitmq/sbin/rabbitmq-server")
USER, PASSWORD = "guest", "guest"


def _server_script() -> str:
    """The server's start script itself (Debian's /usr/sbin wrapper would switch users)."""
    for path in (os.environ.get("CHATQ_TEST_RABBITMQ_SERVER", ""), *SERVER_SCRIPTS):
        if path and os.access(path, os.X_OK):
            return path
    pytest.fail(
        "rabbitmq-server is not installed: the RabbitMQ tests start a node of their "
        "own from Debian's `rabbitmq-server` package (TEST_DEB_PACKAGES)",
        pytrace=False,
    )


class NodeExited(Exception):
    """The node's process ended while it was starting."""


class RabbitNode:
    """One rabbitmq-server process on free ports of `host` (loopback by default), its data kept
    across restarts; `prefix` runs it through another program (`ip netns exec NS`: another
    host, where `localhost` of its node name is that host's own loopback)."""

    def __init__(self, host: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> None:
        self.host, self.prefix = host, prefix
        self.dir = Path(tempfile.mkdtemp(prefix="chatq-rabbitmq-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.started_once = False
        self._choose_ports()

    def _choose_ports(self) -> None:
        """Three distinct free ports, and the configuration naming them."""
        ports: set[int] = set()
        while len(ports) < 3:
            ports.add(free_port())
        self.amqp_port, self.api_port, self.dist_port = sorted(ports)
        self.name = f"chatq-test-{self.amqp_port}@localhost"
        (self.dir / "enabled_plugins").write_text("[rabbitmq_management].\n")
        (self.dir / "env.conf").write_text("")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = {self.host}:{self.amqp_port}\n"
            f"management.tcp.ip = {self.host}\nmanagement.tcp.port = {self.api_port}\n"
            # guest may log in from other hosts than the node's own (tests only).
            + ("" if self.host == "127.0.0.1" else "loopback_users = none\n")
        )

    @property
    def api(self) -> str:
        """The management API's base URL."""
        return f"http://{self.host}:{self.api_port}"

    def url(self, vhost: str, user: str = USER, password: str = PASSWORD) -> str:
        """The AMQP URL of `vhost` on this node."""
        return (
            f"amqp://{user}:{password}@{self.host}:{self.amqp_port}/"
            f"{urllib.parse.quote(vhost, safe='')}"
        )

    def _env(self) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        return {
            **base,
            "HOME": str(self.dir),  # the Erlang cookie of this node and of its rabbitmqctl
            "RABBITMQ_CONF_ENV_FILE": str(self.dir / "env.conf"),
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": self.host,
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.dir / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_PID_FILE": str(self.dir / "node.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    def start(self) -> RabbitNode:
        """Start the node (on its old data, if it ran before); return once its API answers.
        A first start whose node exits at once (a port taken since it was chosen) is tried
        again on other ports, twice at most."""
        for attempt in range(3):
            self._launch()
            try:
                wait_until(self._ready, 60, f"RabbitMQ node {self.name}", every_s=0.2)
            except NodeExited:
                if self.started_once or attempt == 2:
                    raise AssertionError(
                        f"RabbitMQ node {self.name} exited; its log ends:\n{self._log_tail()}"
                    ) from None
                self._choose_ports()
                continue
            self.started_once = True
            return self
        raise AssertionError("unreachable")

    def _log_path(self) -> Path:
        return LOG_DIR / f"rabbitmq-{self.amqp_port}.log"

    def _launch(self) -> None:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        log = open(self._log_path(), "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*self.prefix, _server_script()],
            cwd=self.dir,
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _log_tail(self, chars: int = 3000) -> str:
        try:
            return self._log_path().read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def _ready(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise NodeExited(self.name)
        answer = requests.get(f"{self.api}/api/overview", auth=(USER, PASSWORD), timeout=1)
        return answer.ok

    def kill(self) -> None:
        """SIGKILL the node's whole process group: no goodbye to any client."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        """Stop the node and remove its data. A SIGKILL: its data goes anyway, and a clean
        stop (SIGTERM) took the Erlang VM about 7 s."""
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _call(self, method: str, path: str, **kwargs: object) -> requests.Response:
        answer = requests.request(
            method, f"{self.api}/api/{path}", auth=(USER, PASSWORD), timeout=10, **kwargs
        )  # type: ignore[arg-type]
        answer.raise_for_status()
        return answer

    def add_vhost(self) -> str:
        """A new vhost that the guest user may use fully; its name."""
        vhost = f"chatq-{uuid.uuid4().hex[:12]}"
        self._call("PUT", f"vhosts/{urllib.parse.quote(vhost, safe='')}")
        self.allow(vhost, USER)
        return vhost

    def allow(self, vhost: str, user: str) -> None:
        """Let `user` configure, write and read everything in `vhost`."""
        quoted = urllib.parse.quote(vhost, safe="")
        self._call(
            "PUT",
            f"permissions/{quoted}/{user}",
            json={"configure": ".*", "write": ".*", "read": ".*"},
        )

    def add_user(self, vhost: str) -> tuple[str, str]:
        """A user of `vhost` alone with the `monitoring` tag, as docs/scaling-out.md advises: (name,
        password), the password a fresh secret."""
        user, password = f"user-{vhost}", f"brokerpw-{uuid.uuid4().hex}"
        self._call("PUT", f"users/{user}", json={"password": password, "tags": "monitoring"})
        self.allow(vhost, user)
        return user, password

    def delete_vhost(self, vhost: str) -> None:
        """Delete `vhost` and everything in it."""
        self._call("DELETE", f"vhosts/{urllib.parse.quote(vhost, safe='')}")

    def delete_user(self, user: str) -> None:
        """Delete `user`."""
        self._call("DELETE", f"users/{urllib.parse.quote(user, safe='')}")

    def queue(self, vhost: str, name: str) -> dict[str, object]:
        """The management API's view of queue `name` (statistics as of their last tick)."""
        path = f"queues/{urllib.parse.quote(vhost, safe='')}/{name}"
        loaded: dict[str, object] = self._call("GET", path).json()
        return loaded


@dataclass
class RabbitStack:
    """A chatq stack whose broker is a vhost of a RabbitMQ node of the tests' own, on a Redis
    and a fakellm of its own (so that its sweeper sees only its jobs, and calls are counted)."""

    stack: Stack
    node: RabbitNode
    vhost: str
    upstream: str  # fakellm's base URL, without /v1
    user: str  # the vhost's own user, which chatq connects as
    password: str

    def logs(self) -> str:
        """Everything the stack's processes have logged."""
        return "".join(proc.log_text() for proc in self.stack.procs)

    def calls(self) -> int:
        """Requests fakellm has answered so far."""
        return int(requests.get(f"{self.upstream}/stats", timeout=5).json()["requests"])

    def ready(self) -> int:
        """Messages waiting in chatq's jobs queue now (AMQP's queue.declare-ok, live)."""
        with Connection(self.node.url(self.vhost)) as conn:
            answer: Any = rabbitmq.jobs_queue()(conn.default_channel).queue_declare()
            return int(answer.message_count)

    def messages(self) -> int:
        """Ready and unacknowledged messages of the jobs queue, per the management API."""
        counted = self.node.queue(self.vhost, rabbitmq.JOBS_QUEUE).get("messages")
        return int(counted) if isinstance(counted, int) else -1

    def queue_figures(self) -> dict[str, Any]:
        """GET /v1/queue."""
        answer = self.stack.session().get(f"{self.stack.url}/v1/queue", timeout=10)
        assert answer.status_code == 200, answer.text
        loaded: dict[str, Any] = answer.json()
        return loaded


StackFactory = Callable[..., RabbitStack]


@contextmanager
def rabbit_stacks(node: RabbitNode) -> Iterator[StackFactory]:
    """Builds RabbitStacks on `node`, each in a new vhost; stops and removes them all after."""
    built: list[tuple[RabbitStack, LocalRedis, Proc]] = []

    def build(workers: int = 1, **env: str) -> RabbitStack:
        server = LocalRedis().start()
        fake, fake_url = start_fakellm()
        vhost = node.add_vhost()
        user, password = node.add_user(vhost)
        broker = {
            "CHATQ_BROKER_URL": node.url(vhost, user, password),
            "CHATQ_BROKER_API_URL": node.api,
        }
        stack = start_stack(server.url, fake_url, workers=workers, **{**broker, **env})
        made = RabbitStack(stack, node, vhost, fake_url.removesuffix("/v1"), user, password)
        built.append((made, server, fake))
        return made

    try:
        yield build
    finally:
        for made, server, fake in built:
            # An idle worker on RabbitMQ takes up to ~4.5 s to stop (docs/scaling-out.md,
            # "RabbitMQ as the broker"); these tests do not look at how it stops.
            made.stack.stop(grace_s=1.0)
            fake.stop()
            server.stop()
            if node.process is not None:
                node.delete_vhost(made.vhost)
                node.delete_user(made.user)
