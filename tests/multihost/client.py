"""What the multi-host tests' client does: submit, long-poll, keep calling a web host from a
thread, and read the jobs' records."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import requests

from chatq import keys
from chatq.jobs import record as jobs
from chatq.runtime import heartbeats
from tests.multihost.site import WEBS, Site, job_records


def submit_then_wait(site: Site, i: int) -> tuple[dict[str, Any], float, str]:
    """Submit job `i` on one web host and long-poll it on the other (for half of the `i`) or
    the same; answers (the job, seconds from its end to the answer, the web that woke)."""
    session = site.session()
    submit_on = WEBS[i % 2]
    poll_on = WEBS[(i + 1) % 2] if across(i) else submit_on
    body = {"model": "fake:ttft=1", "messages": [{"role": "user", "content": f"job {i}"}]}
    posted = session.post(f"{site.webs[submit_on]}/v1/jobs", json=body, timeout=30)
    assert posted.status_code == 202, posted.text
    got = session.get(f"{site.webs[poll_on]}/v1/jobs/{posted.json()['id']}?wait=30", timeout=40)
    woke_at = time.time()
    job = got.json()
    assert got.status_code == 200, job
    return job, woke_at - float(job["completed_at"]), poll_on


def across(i: int) -> bool:
    """Whether job `i` is long-polled on the other web host: 0 and 1 of every 4."""
    return i % 4 < 2


def submit(site: Site, web: str, content: str, model: str, wait_s: float = 0) -> dict[str, Any]:
    """POST /v1/jobs on `web`: the job (200 or 202 asserted)."""
    body = {"model": model, "messages": [{"role": "user", "content": content}]}
    answer = site.session().post(
        f"{site.webs[web]}/v1/jobs?wait={wait_s}", json=body, timeout=wait_s + 30
    )
    assert answer.status_code in (200, 202), answer.text
    job: dict[str, Any] = answer.json()
    return job


def long_poll(site: Site, web: str, job_id: str, wait_s: float) -> tuple[int, float]:
    """GET the job with `wait_s` on `web`: (its status code, 0 if no answer; seconds taken)."""
    t0 = time.monotonic()
    try:
        url = f"{site.webs[web]}/v1/jobs/{job_id}?wait={wait_s}"
        status = site.session().get(url, timeout=wait_s + 30).status_code
    except requests.RequestException:
        status = 0
    return status, time.monotonic() - t0


def submits_ok(site: Site, web: str) -> bool:
    """Whether `web` accepts a job now."""
    body = {"model": "fake", "messages": [{"role": "user", "content": "ok?"}]}
    answer = site.session().post(f"{site.webs[web]}/v1/jobs", json=body, timeout=10)
    return answer.status_code == 202


def all_terminal(site: Site, ids: list[str]) -> list[dict[str, Any]] | None:
    """The jobs' records once every one is terminal, else None."""
    records = job_records(site, ids)
    return records if all(jobs.is_terminal(r.get("status", "")) for r in records) else None


def busy_by_pid(site: Site) -> dict[int, int]:
    """Jobs each worker process runs, per its last heartbeat: {pid: busy}."""
    beats = site.state.hgetall(keys.workers())
    return {int(name.rsplit(":", 1)[1]): heartbeats.parse(v).busy for name, v in beats.items()}


@dataclass
class Answer:
    """One submit a Probe made: when it was sent and answered (monotonic s), its status code
    (0: no answer), body and Retry-After."""

    sent_at: float
    got_at: float
    status: int
    body: dict[str, Any]
    retry_after: str = ""


@dataclass
class Probe:
    """A client that keeps submitting to one web host from a thread, every answer kept."""

    site: Site
    web: str
    every_s: float
    wait_s: float = 0
    model: str = "fake"
    answers: list[Answer] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        """Submit every `every_s` until `stop` is set."""
        session = self.site.session()
        while not self.stop.is_set():
            t0 = time.monotonic()
            content = f"probe {self.web} {len(self.answers)}"
            body = {"model": self.model, "messages": [{"role": "user", "content": content}]}
            url = f"{self.site.webs[self.web]}/v1/jobs?wait={self.wait_s}"
            try:
                got = session.post(url, json=body, timeout=30)
                retry_after = got.headers.get("Retry-After", "")
                answer = Answer(t0, time.monotonic(), got.status_code, got.json(), retry_after)
            except requests.RequestException as exc:
                answer = Answer(t0, time.monotonic(), 0, {"error": type(exc).__name__})
            self.answers.append(answer)
            self.stop.wait(max(0.0, self.every_s - (time.monotonic() - t0)))

    def statuses(self, since: float = 0, until: float = float("inf")) -> Counter[int]:
        """How many answers of each status code were sent in [since, until)."""
        return Counter(a.status for a in self.answers if since <= a.sent_at < until)

    def accepted(self) -> list[str]:
        """Ids of the jobs it was answered 200 or 202 for."""
        return [str(a.body["id"]) for a in self.answers if a.status in (200, 202)]


@contextmanager
def probing(*probes: Probe) -> Iterator[tuple[Probe, ...]]:
    """Each probe submitting from a thread of its own meanwhile; stopped and joined after."""
    threads = [threading.Thread(target=p.run) for p in probes]
    for thread in threads:
        thread.start()
    try:
        yield probes
    finally:
        for probe in probes:
            probe.stop.set()
        for thread in threads:
            thread.join(60)
