"""Scenario 5 of "Prove it across hosts": RabbitMQ as the broker, on a host of its own (its
Erlang node named `…@localhost`, which is that host's own loopback, with its own epmd): the
pipeline across web hosts, a worker host lost, and the broker SIGKILLed and restarted under
load. Job records stay in redis-a's Redis."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from chatq.broker import rabbitmq
from tests.multihost.client import (
    Probe,
    all_terminal,
    busy_by_pid,
    probing,
    submit,
    submit_then_wait,
)
from tests.multihost.site import WEBS, Site, make_net, spot, start_site
from tests.procs import wait_until
from tests.rabbitmq import RabbitNode

# `long`: started first in `make test-slow`, where these files are one unit (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.long]


@contextmanager
def rabbit_site(**env: str) -> Iterator[tuple[Site, RabbitNode]]:
    """The site with RabbitMQ on host `rabbit` as its broker (a vhost and user of its own)."""
    net = make_net(("rabbit", "mq"))
    node: RabbitNode | None = None
    try:
        with net.inside("client"):
            address, prefix = spot(net, "rabbit")
            node = RabbitNode(address, prefix).start()
            vhost = node.add_vhost()
            user, password = node.add_user(vhost)
            broker = {"CHATQ_BROKER_URL": node.url(vhost, user, password)}
            site = start_site(net, **broker, CHATQ_BROKER_API_URL=node.api, **env)
            try:
                yield site, node
            finally:
                site.stop()
    finally:
        if node is not None:
            node.stop()
        net.delete()


def test_the_pipeline_then_a_lost_worker_host_with_rabbitmq() -> None:
    """100 jobs over both web hosts, long-polled on the other for half; then worker-1's host
    lost with 40 jobs in flight: all complete on worker-2, one more upstream call for each job
    worker-1 ran; the jobs queue ends empty."""
    with rabbit_site(CHATQ_LEASE="2", CHATQ_WORKER_CONCURRENCY="30") as (site, node):
        with ThreadPoolExecutor(20) as pool:
            done = list(pool.map(lambda i: submit_then_wait(site, i), range(100)))
        assert Counter(job["status"] for job, _, _ in done) == {"completed": 100}
        model = "fake:ttft=0.2,tps=5,tokens=30"
        with ThreadPoolExecutor(8) as pool:
            posted = list(pool.map(lambda i: submit(site, WEBS[i % 2], f"k {i}", model), range(40)))
        ids = [job["id"] for job in posted]
        wait_until(lambda: sum(busy_by_pid(site).values()) == 40, 30, "40 jobs running")
        on_worker_1 = busy_by_pid(site)[site.procs["worker-1"][0].pid]
        calls_before = site.calls()
        site.lose("worker-1")
        lost_at = time.monotonic()
        # Worker-1 vanished without closing its connection: RabbitMQ keeps delivering to it
        # (jobs sent again included) until its heartbeats stop (chatq/broker/celery_app.py).
        records = wait_until(lambda: all_terminal(site, ids), 2 + 30, "all terminal")
        took_s = time.monotonic() - lost_at
        calls = site.calls() - calls_before
        vhost = site.env["CHATQ_BROKER_URL"].rsplit("/", 1)[1]
        wait_until(
            lambda: node.queue(vhost, rabbitmq.JOBS_QUEUE).get("messages") == 0, 30, "queue empty"
        )
    assert Counter(r["status"] for r in records) == {"completed": 40}
    assert 0 < on_worker_1 < 40
    assert Counter(int(r["attempts"]) for r in records) == {1: 40 - on_worker_1, 2: on_worker_1}
    assert calls == on_worker_1
    print(
        f"\nRabbitMQ across hosts: 100 jobs completed; worker host lost with {on_worker_1} "
        f"of 40 jobs on it, all 40 completed on worker-2 {took_s:.1f} s after the loss, "
        f"{on_worker_1} upstream calls more"
    )


def test_a_rabbitmq_host_restart_under_load_loses_no_accepted_job() -> None:
    """RabbitMQ SIGKILLed under 20 submits a second and started again on its data 3 s later:
    every submit is accepted (kept in Redis, sent by the sweeper once the broker is back),
    every accepted job completes with one upstream call."""
    with rabbit_site(CHATQ_LEASE="2", CHATQ_QUEUE_RESEND="2") as (site, node):
        with probing(*(Probe(site, web, every_s=0.1) for web in WEBS)) as traffic:
            time.sleep(2)
            node.kill()
            time.sleep(3)
            node.start()
            time.sleep(4)
        answers = [a for probe in traffic for a in probe.answers]
        ids = [job_id for probe in traffic for job_id in probe.accepted()]
        records = wait_until(lambda: all_terminal(site, ids), 60, "all accepted terminal")
        calls = site.calls()
    assert Counter(a.status for a in answers) == {202: len(ids)}
    assert Counter(r["status"] for r in records) == {"completed": len(ids)}
    assert calls == len(ids)
    print(
        f"\nRabbitMQ host restarted under load: {len(ids)} submits, all accepted and "
        f"completed, one upstream call each"
    )
