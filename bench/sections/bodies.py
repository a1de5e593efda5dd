"""Issue 34, H2: `/healthz` latency while a web process receives a large body.

A prober asks one web for `/healthz` every 10 ms on a keep-alive connection, each probe's
latency counted from when it was due (a probe held up behind a frozen process counts the time
it waited to be sent, as an open-loop client would). It runs alone, then during an accepted
upload (`POST /v1/files`, authenticated, one file of `bodies_upload_bytes`), then while one
client sends unauthenticated bodies of `bodies_refused_bytes` to `POST /v1/jobs` one after
another, for `bodies_refused_window_s` (each on a new connection, until the web answers and
closes it or the whole body is sent).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from typing import Any

import requests

from bench import procstat
from bench.lab import Lab
from bench.sections.common import JSON
from bench.stack import ChatqStack
from bench.stats import summary_ms
from tests.procs import ALICE_KEY

PROBE_EVERY_S = 0.01
PIECE_BYTES = 1024 * 1024
# A piece of a batch file: lines of 8 KiB.
PIECE = (b"x" * 8191 + b"\n") * (PIECE_BYTES // 8192)
BOUNDARY = "chatq-bench-boundary"
TARGET_MS = 50.0

STACKS = [("bodies", {"workers": 0})]


class Prober(threading.Thread):
    """GET /healthz every PROBE_EVERY_S until stopped; latencies from each probe's due time.

    A probe held up makes the next ones overdue: they go out back to back once it returns,
    each counted from when it was due, up to the stop (so a freeze counts once per probe that
    was due during it, not once in all)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(daemon=True)
        self.conn = http.client.HTTPConnection(host, port, timeout=60)
        self.latencies_s: list[float] = []
        self.stop_at = float("inf")

    def run(self) -> None:
        due = time.perf_counter()
        while due < self.stop_at:
            time.sleep(max(0.0, due - time.perf_counter()))
            self.conn.request("GET", "/healthz")
            response = self.conn.getresponse()
            response.read()
            self.latencies_s.append(time.perf_counter() - due)
            due += PROBE_EVERY_S

    def stop(self) -> JSON:
        """Stop probing (the probes due until now still go); the latency summary."""
        self.stop_at = time.perf_counter()
        self.join(120)
        self.conn.close()
        return summary_ms(self.latencies_s)


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _status(conn: socket.socket) -> int | None:
    """The status code of the answer on `conn`, None when there is none."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(conn.makefile("rb").readline().split()[1])
    return None


def _send_pieces(conn: socket.socket, size_bytes: int) -> int:
    """Send `size_bytes` of PIECE; the bytes sent before the web closed the connection."""
    sent = 0
    with contextlib.suppress(OSError):
        while sent < size_bytes:
            piece = PIECE[: size_bytes - sent]
            conn.sendall(piece)
            sent += len(piece)
    return sent


def upload(url: str, size_bytes: int) -> JSON:
    """One authenticated upload of `size_bytes` (then deleted); its status and seconds."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    length = len(head) + size_bytes + len(tail)
    t0 = time.perf_counter()
    with socket.create_connection(_address(url), timeout=120) as conn:
        conn.sendall(
            f"POST /v1/files HTTP/1.1\r\nHost: chatq\r\nAuthorization: Bearer {ALICE_KEY}\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n".encode()
            + head
        )
        _send_pieces(conn, size_bytes)
        conn.sendall(tail)
        answer = b"".join(iter(lambda: conn.recv(65536), b""))
    seconds = time.perf_counter() - t0
    status = int(answer.split()[1])
    file_id = answer.split(b'"id":"')[1].split(b'"')[0].decode() if status == 200 else ""
    return {"bytes": size_bytes, "status": status, "seconds": round(seconds, 2), "id": file_id}


def delete(url: str, file_id: str) -> None:
    """Delete the uploaded file (after the measurement: unlinking it takes the web's loop)."""
    if file_id:
        auth = {"Authorization": f"Bearer {ALICE_KEY}"}
        requests.delete(f"{url}/v1/files/{file_id}", headers=auth, timeout=30)


def refused_bodies(url: str, size_bytes: int, window_s: float) -> JSON:
    """Unauthenticated bodies of `size_bytes`, one after another for `window_s`."""
    counts: dict[str, int] = {}
    sent_bytes, bodies = 0, 0
    start = time.perf_counter()
    deadline = start + window_s
    while time.perf_counter() < deadline:
        with socket.create_connection(_address(url), timeout=60) as conn:
            conn.sendall(
                f"POST /v1/jobs HTTP/1.1\r\nHost: chatq\r\nContent-Type: application/json\r\n"
                f"Content-Length: {size_bytes}\r\n\r\n".encode()
            )
            sent_bytes += _send_pieces(conn, size_bytes)
            status = str(_status(conn))
        counts[status] = counts.get(status, 0) + 1
        bodies += 1
    return {
        "body_bytes": size_bytes,
        "bodies": bodies,
        "answers": counts,
        "bytes_sent": sent_bytes,
        "window_s": window_s,
        "seconds": round(time.perf_counter() - start, 2),
    }


def _probed(web: ChatqStack, load: Any, *args: Any) -> JSON:
    """`load(url, *args)`'s figures with the /healthz latency while it ran, and the web's CPU
    seconds over the wall seconds (below 1 the machine did not give it a whole core)."""
    prober = Prober(*_address(web.url))
    cpu_s, t0 = procstat.cpu_seconds(web.web.pid), time.perf_counter()
    prober.start()
    try:
        figures: JSON = load(web.url, *args)
    finally:
        healthz = prober.stop()
    cpu_s = procstat.cpu_seconds(web.web.pid) - cpu_s
    wall_s = time.perf_counter() - t0
    return {**figures, "healthz": healthz, "web_cpu_per_wall": round(cpu_s / wall_s, 2)}


def _idle(url: str, seconds: float) -> JSON:
    time.sleep(seconds)
    return {"seconds": seconds}


def run(lab: Lab) -> JSON:
    """The prober alone, during an upload, during refused bodies."""
    sizes = lab.sizes
    web = lab.chatq("bodies", workers=0)
    idle = _probed(web, _idle, sizes.bodies_refused_window_s)
    uploaded = _probed(web, upload, sizes.bodies_upload_bytes)
    delete(web.url, uploaded.pop("id"))
    refused = _probed(
        web, refused_bodies, sizes.bodies_refused_bytes, sizes.bodies_refused_window_s
    )
    return {
        "probe_every_ms": PROBE_EVERY_S * 1000,
        "target_ms": TARGET_MS,
        "idle": idle,
        "upload": uploaded,
        "refused": refused,
    }
