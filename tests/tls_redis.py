"""A redis-server that speaks only TLS, with a certificate from a throwaway `trustme` CA."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import redis
import trustme

from scripts.localredis import free_port, redis_server_binary


def write_ca(ca: trustme.CA, folder: Path, name: str) -> str:
    """Write `ca`'s certificate as PEM; answers its path."""
    path = folder / f"{name}.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


class TlsRedis:
    """redis-server with `--port 0` and a `--tls-port`, its certificate issued by `ca`."""

    def __init__(self, folder: Path, ca: trustme.CA, hostname: str = "127.0.0.1") -> None:
        self.folder = folder
        self.port = free_port()
        cert = ca.issue_cert(hostname)
        self.cert_path, self.key_path = folder / "server.pem", folder / "server.key"
        cert.cert_chain_pems[0].write_to_path(str(self.cert_path))
        cert.private_key_pem.write_to_path(str(self.key_path))
        self.ca_path = write_ca(ca, folder, "server-ca")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The rediss:// URL of this server, by IP address."""
        return f"rediss://127.0.0.1:{self.port}/0"

    def _args(self) -> list[str]:
        return [
            redis_server_binary(),
            "--port",
            "0",
            "--tls-port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.folder),
            "--save",
            "",
            "--tls-cert-file",
            str(self.cert_path),
            "--tls-key-file",
            str(self.key_path),
            "--tls-ca-cert-file",
            self.ca_path,
            "--tls-auth-clients",
            "no",
        ]

    def start(self, timeout_s: float = 10.0) -> TlsRedis:
        """Start it and wait until it answers over TLS; skip the test if it has no TLS."""
        log_path = self.folder / "redis.log"
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(self._args(), stdout=log, stderr=subprocess.STDOUT)
        client = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            ssl=True,
            ssl_ca_certs=self.ca_path,
            ssl_check_hostname=False,
            socket_timeout=1,
            socket_connect_timeout=1,
        )
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                pass
            if self.process.poll() is not None:
                pytest.skip(f"this redis-server cannot serve TLS: {log_path.read_text()[-300:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"TLS redis-server did not answer; see {log_path}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
