"""Chaos: real processes broken for real, and the promise that every accepted job still ends
`completed`, `failed` or `cancelled`, once, never lost and never stuck.

- a worker SIGKILLed with 200 jobs in flight, another taking them over;
- a worker paused (SIGSTOP) past its lease while another takes its jobs, then resumed;
- Redis killed and restarted from its append-only file under load;
- an upstream that fails in every way fakellm knows, for 2,000 jobs (and 200 in `make test`),
  with every answer and every log searched for our keys afterwards.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import requests
from prometheus_client.parser import text_string_to_metric_families

from chatq import keys
from chatq.jobs import record as jobs
from scripts.localredis import LocalRedis
from tests.conftest import Stack, start_stack
from tests.procs import (
    ALICE_KEY,
    BOB_KEY,
    LOG_DIR,
    UPSTREAM_KEY,
    Proc,
    base_env,
    leases_count,
    start_fakellm,
    start_web,
    start_worker,
    wait_until,
)

SECRETS = {"alice": ALICE_KEY, "bob": BOB_KEY, "upstream": UPSTREAM_KEY}


def _db(redis_url: str, db: int) -> str:
    return redis_url.rsplit("/", 1)[0] + f"/{db}"


def _upstream_requests(upstream: str) -> int:
    return int(requests.get(upstream.removesuffix("/v1") + "/stats", timeout=5).json()["requests"])


def _reset_upstream_stats(upstream: str) -> None:
    requests.post(upstream.removesuffix("/v1") + "/stats/reset", timeout=5).raise_for_status()


@pytest.fixture
def own_fakellm() -> Iterator[str]:
    """A fakellm of this test's own, so that its /stats count this test's calls only."""
    proc, url = start_fakellm()
    yield url
    proc.stop()


def _body(content: str, model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}]}


def _submit_all(
    stack: Stack, bodies: list[dict[str, Any]], threads: int = 16
) -> list[requests.Response]:
    session = stack.session()
    url = f"{stack.url}/v1/jobs"
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda b: session.post(url, json=b, timeout=60), bodies))


def _records(client: redis.Redis, ids: list[str]) -> dict[str, dict[str, str]]:
    """Each job's record, with its text as `output_text` (as the store reads it)."""
    pipe = client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hgetall(keys.job(job_id))
        pipe.get(keys.text(job_id))
    out = pipe.execute()
    return {
        job_id: {**out[2 * i], "output_text": out[2 * i + 1] or ""} if out[2 * i] else {}
        for i, job_id in enumerate(ids)
    }


def _events(client: redis.Redis, job_id: str) -> list[dict[str, str]]:
    return [data for _, data in client.xrange(keys.events(job_id))]


def _wait_terminal(client: redis.Redis, ids: list[str], deadline: float) -> dict[str, str]:
    """Poll the job records until all are terminal or `deadline` (monotonic) passes."""
    while True:
        statuses = {j: r.get("status", "missing") for j, r in _records(client, ids).items()}
        if all(jobs.is_terminal(s) for s in statuses.values()) or time.monotonic() > deadline:
            return statuses
        time.sleep(0.25)


def _assert_events_tell_the_output(
    client: redis.Redis, job_id: str, record: dict[str, str]
) -> list[dict[str, str]]:
    """One `end`, last; the deltas after the last reset are exactly output_text."""
    events = _events(client, job_id)
    ends = [e for e in events if e["t"] == "end"]
    assert len(ends) == 1 and events[-1]["t"] == "end", (job_id, events[-5:])
    assert ends[0]["v"] == record["status"]
    text: list[str] = []
    for e in events:
        if e["t"] == "reset":
            text = []
        elif e["t"] == "delta":
            text.append(e["v"])
        elif e["t"] == "end":
            text.append(e.get("d", ""))  # the last piece rides on the end's entry
    assert "".join(text) == record["output_text"], job_id
    return events


def _worker_metrics(proc: Proc) -> dict[str, float]:
    """A worker's counters summed by name and first label value: {"name{value}": total}."""
    bind = proc.env["CHATQ_WORKER_METRICS_BIND"]
    text = requests.get(f"http://{bind}/metrics", timeout=10).text
    totals: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] += sample.value
            label = next(iter(sample.labels.values()), "")
            if label:
                totals[f"{sample.name}{{{label}}}"] += sample.value
    return dict(totals)


def _leaks(texts: dict[str, str]) -> list[tuple[str, str]]:
    return [
        (where, name)
        for where, text in texts.items()
        for name, secret in SECRETS.items()
        if secret in text
    ]


# --- worker loss -----------------------------------------------------------------------

TOKENS = 120


@pytest.mark.slow
def test_sigkill_of_a_worker_with_200_jobs_in_flight(redis_url: str, own_fakellm: str) -> None:
    lease_s = 5.0
    s = start_stack(
        _db(redis_url, 11),
        own_fakellm,
        workers=0,
        CHATQ_WORKER_CONCURRENCY="200",
        CHATQ_LEASE=str(lease_s),
    )
    try:
        s.redis.flushdb()
        # 12 s a job: on a loaded machine one worker's claims of all 200 can take several
        # seconds, and every job must still be streaming when the last one starts.
        model = f"fake:ttft=0.2,tps=10,tokens={TOKENS}"
        nonce = time.time_ns()
        posted = _submit_all(s, [_body(f"kill {nonce} {i}", model) for i in range(200)])
        ids = [r.json()["id"] for r in posted]
        _reset_upstream_stats(own_fakellm)
        first = start_worker(s.env, "")
        s.procs.append(first)
        wait_until(
            lambda: all(
                r.get("status") == "in_progress" and r.get("output_text")
                for r in _records(s.redis, ids).values()
            ),
            30,
            "200 streaming",
        )
        first.kill()
        killed_at = time.monotonic()
        at_kill = _records(s.redis, ids)
        killed = [j for j, r in at_kill.items() if not jobs.is_terminal(r["status"])]
        calls_at_kill = _upstream_requests(own_fakellm)
        s.procs.append(start_worker(s.env, ""))
        statuses = _wait_terminal(s.redis, ids, killed_at + lease_s + 30)
        took_s = time.monotonic() - killed_at
        assert Counter(statuses.values()) == {"completed": 200}, (statuses, took_s)
        assert len(killed) == 200 and calls_at_kill == 200
        for job_id, record in _records(s.redis, ids).items():
            assert len(record["output_text"].split()) == TOKENS
            events = _assert_events_tell_the_output(s.redis, job_id, record)
            assert any(e["t"] == "reset" for e in events), job_id
        extra_calls = _upstream_requests(own_fakellm) - calls_at_kill
        assert extra_calls <= len(killed), extra_calls
        assert leases_count(s.redis) == 0
        print(
            f"SIGKILL: {len(killed)} jobs in flight, all completed {took_s:.1f} s after the "
            f"kill, {extra_calls} extra upstream calls"
        )
    finally:
        s.stop()


@pytest.mark.slow
def test_a_paused_worker_loses_its_jobs_and_its_late_results_are_dropped(
    redis_url: str, own_fakellm: str
) -> None:
    """SIGSTOP past the lease (10 s, Redis out of its reach); another worker takes over; at
    SIGCONT the paused one writes nothing: no job ends twice, no late text lands."""
    s = start_stack(_db(redis_url, 12), own_fakellm, workers=0, CHATQ_LEASE="3")
    try:
        s.redis.flushdb()
        nonce = time.time_ns()
        # Short jobs end on the second worker while the first is still paused; long ones are
        # still running there when it wakes.
        short = [_body(f"short {nonce} {i}", "fake:ttft=0.2,tps=4,tokens=30") for i in range(10)]
        long = [_body(f"long {nonce} {i}", "fake:ttft=0.2,tps=4,tokens=80") for i in range(10)]
        ids = [r.json()["id"] for r in _submit_all(s, short + long)]
        short_ids, long_ids = ids[:10], ids[10:]
        _reset_upstream_stats(own_fakellm)
        paused = start_worker(s.env, "")
        s.procs.append(paused)
        wait_until(
            lambda: all(r.get("output_text") for r in _records(s.redis, ids).values()),
            30,
            "all streaming on the first worker",
        )
        paused.signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            taker = start_worker(s.env, "")
            s.procs.append(taker)
            statuses = _wait_terminal(s.redis, short_ids, stopped_at + 40)
            assert set(statuses.values()) == {"completed"}, statuses
            time.sleep(max(0.0, 10 - (time.monotonic() - stopped_at)))
            before = {
                j: (r, s.redis.xlen(keys.events(j)))
                for j, r in _records(s.redis, short_ids).items()
            }
            still = [r["status"] for r in _records(s.redis, long_ids).values()]
            assert not any(map(jobs.is_terminal, still)), "the long jobs ended too early"
        finally:
            paused.signal(signal.SIGCONT)
        resumed_at = time.monotonic()
        statuses = _wait_terminal(s.redis, long_ids, resumed_at + 40)
        assert set(statuses.values()) == {"completed"}, statuses
        # The resumed worker's runs end (dropped: their leases are another's); then it
        # writes no more.
        wait_until(
            lambda: _worker_metrics(paused).get("chatq_worker_running_jobs") == 0,
            30,
            "the resumed worker's runs to end",
        )
        assert paused.alive() and taker.alive()
        after = {
            j: (r, s.redis.xlen(keys.events(j))) for j, r in _records(s.redis, short_ids).items()
        }
        assert after == before, "a late result changed a job another worker had finished"
        for job_id, record in _records(s.redis, ids).items():
            words = 30 if job_id in short_ids else 80
            assert record["status"] == "completed"
            assert len(record["output_text"].split()) == words, job_id
            events = _assert_events_tell_the_output(s.redis, job_id, record)
            assert any(e["t"] == "reset" for e in events)
        paused_done = _worker_metrics(paused).get("chatq_jobs_finished_total{completed}", 0)
        taker_done = _worker_metrics(taker).get("chatq_jobs_finished_total{completed}", 0)
        assert (paused_done, taker_done) == (0, 20)
        assert _upstream_requests(own_fakellm) == 40  # one call each before, one after
        assert leases_count(s.redis) == 0
    finally:
        s.stop()


# --- Redis loss --------------------------------------------------------------------------


@dataclass
class Traffic:
    """Clients hammering the stack from threads, every answer recorded."""

    url: str
    submits: list[tuple[float, float, int, dict[str, Any], dict[str, str]]] = field(
        default_factory=list
    )
    polls: list[tuple[str, float, float, int, str, dict[str, str]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    accepted: list[str] = field(default_factory=list)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ALICE_KEY}"}

    def submit_loop(self, every_s: float, model: str) -> None:
        n = 0
        while not self.stop.is_set() and n < 2000:
            n += 1
            t0 = time.monotonic()
            try:
                r = requests.post(
                    f"{self.url}/v1/jobs",
                    json=_body(f"load {n} {t0}", model),
                    headers=self._headers(),
                    timeout=30,
                )
                body = r.json()
                self.submits.append((t0, time.monotonic(), r.status_code, body, dict(r.headers)))
                if r.status_code in (200, 202):
                    self.accepted.append(body["id"])
            except requests.RequestException as exc:
                self.submits.append((t0, time.monotonic(), 0, {"error": type(exc).__name__}, {}))
            self.stop.wait(max(0.0, every_s - (time.monotonic() - t0)))

    def poll_loop(self, wait_s: float) -> None:
        n = 0
        while not self.stop.is_set() and n < 2000:
            n += 1
            if not self.accepted:
                self.stop.wait(0.1)
                continue
            job_id = self.accepted[-1]
            for suffix in ("", "/events"):
                t0 = time.monotonic()
                try:
                    r = requests.get(
                        f"{self.url}/v1/jobs/{job_id}{suffix}",
                        params={"wait": wait_s},
                        headers=self._headers(),
                        timeout=wait_s + 30,
                    )
                    self.polls.append(
                        (suffix, t0, time.monotonic() - t0, r.status_code, r.text, dict(r.headers))
                    )
                except requests.RequestException as exc:
                    self.polls.append(
                        (suffix, t0, time.monotonic() - t0, 0, type(exc).__name__, {})
                    )


def _restart_same_redis(old: LocalRedis) -> LocalRedis:
    """A new redis-server on the old one's port, loading the old one's append-only file."""
    new = LocalRedis(port=old.port, appendonly=True)
    new.dir = old.dir
    return new.start()


def _assert_503_backend_unavailable(status: int, body: Any, headers: dict[str, str]) -> None:
    assert status == 503, (status, body)
    assert body["error"]["code"] == "backend_unavailable", body
    assert int(headers["Retry-After"]) >= 1


@pytest.mark.slow
def test_a_redis_restart_under_load_loses_no_accepted_job(fakellm: str) -> None:
    server = LocalRedis(appendonly=True).start()
    env = base_env(server.url, fakellm, CHATQ_LEASE="3", CHATQ_QUEUE_RESEND="15")
    worker = start_worker(env, server.url)
    web, url = start_web(env)
    procs = [worker, web]
    traffic = Traffic(url)
    wait_s = 6.0
    threads = [
        threading.Thread(target=traffic.submit_loop, args=(0.05, "fake:ttft=0.3,tps=20,tokens=20"))
    ]
    threads += [threading.Thread(target=traffic.poll_loop, args=(wait_s,)) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        # Load before the loss, and after the restart, until jobs are accepted again: more
        # time adds jobs, not cases.
        wait_until(lambda: len(traffic.accepted) > 20, 30, "jobs accepted before the loss")
        accepted_before = len(traffic.accepted)
        down_at = time.monotonic()
        server.stop(kill=True)
        time.sleep(5)
        restart_at = time.monotonic()
        server = _restart_same_redis(server)
        accepted_down = len(traffic.accepted)
        wait_until(lambda: len(traffic.accepted) > accepted_down + 20, 40, "jobs accepted after it")
        traffic.stop.set()
        for t in threads:
            t.join(wait_s + 40)
        assert accepted_before > 20
        client = redis.Redis.from_url(server.url, decode_responses=True)
        ids = list(traffic.accepted)
        statuses = _wait_terminal(client, ids, time.monotonic() + 60)
        assert worker.alive() and web.alive(), "a process exited"
        counts = Counter(statuses.values())
        assert counts == {"completed": len(ids)}, counts
        # While Redis was away, submits answered 503 backend_unavailable with Retry-After.
        during = [st for t0, t1, st, _, _ in traffic.submits if down_at < t0 and t1 < restart_at]
        assert during and set(during) == {503}, Counter(during)
        failed = [(st, b, h) for _, _, st, b, h in traffic.submits if st not in (200, 202)]
        for st, b, h in failed:
            _assert_503_backend_unavailable(st, b, h)
        # Long-polls answered, or said 503 clearly, and none outlived its wait.
        assert traffic.polls
        for suffix, _t0, took_s, st, text, headers in traffic.polls:
            assert took_s < wait_s + 3, (suffix, took_s, st)
            if st == 503:
                _assert_503_backend_unavailable(st, json.loads(text), headers)
            else:
                assert st in (200, 202), (suffix, st, text[:300])
        print(
            f"Redis restart: {len(ids)} accepted, all completed; {len(failed)} submits "
            f"answered 503; {sum(1 for p in traffic.polls if p[3] == 503)} of "
            f"{len(traffic.polls)} long-polls answered 503"
        )
    finally:
        traffic.stop.set()
        for p in procs:
            p.stop()
        server.stop()


# --- upstream chaos ----------------------------------------------------------------------

CHAOS_ENV = {
    "CHATQ_JOB_TIMEOUT": "30",
    "CHATQ_UPSTREAM_FIRST_BYTE_TIMEOUT": "1",
    "CHATQ_UPSTREAM_READ_TIMEOUT": "1",
    "CHATQ_UPSTREAM_MAX_ATTEMPTS": "4",
    "CHATQ_RETRY_BASE": "0.1",
    "CHATQ_WORKER_CONCURRENCY": "300",
}


def _chaos_model(i: int) -> tuple[str, str]:
    """(kind, model) for job i: 20 % 5xx, 5 % 429 with Retry-After, 2 % hangs, 2 % dropped
    streams, 1 % garbage, each failing once (`fail_first=1`) so that a retry can succeed
    (garbage is not retried: it fails its job as `upstream_invalid_response`)."""
    slot = i % 100
    if slot < 20:
        return "5xx", f"fake:status={(500, 502, 503)[i % 3]},fail_first=1,tokens=5"
    if slot < 25:
        return "429", "fake:status=429,retry_after=1,fail_first=1,tokens=5"
    if slot < 27:
        return "hang", "fake:hang=1,fail_first=1,tokens=5"
    if slot < 29:
        return "drop", "fake:tps=100,tokens=20,drop_after=3,fail_first=1"
    if slot < 30:
        return "garbage", "fake:garbage=1,fail_first=1,tokens=5"
    return "ok", "fake:tps=200,tokens=10" if slot % 2 else "fake:tokens=10"


def _chaos(redis_url: str, upstream: str, db: int, n_jobs: int) -> None:
    s = start_stack(_db(redis_url, db), upstream, workers=2, **CHAOS_ENV)
    captured: dict[str, str] = {}
    try:
        s.redis.flushdb()
        nonce = time.time_ns()
        kinds = [_chaos_model(i) for i in range(n_jobs)]
        started = time.monotonic()
        posted = _submit_all(s, [_body(f"chaos {nonce} {i}", m) for i, (_, m) in enumerate(kinds)])
        submitted = time.monotonic()
        assert Counter(r.status_code for r in posted) == {202: n_jobs}
        captured |= {
            f"submit {i}": r.text + json.dumps(dict(r.headers)) for i, r in enumerate(posted)
        }
        ids = [r.json()["id"] for r in posted]
        deadline = submitted + float(CHAOS_ENV["CHATQ_JOB_TIMEOUT"]) + 15
        statuses = _wait_terminal(s.redis, ids, deadline)
        took_s = time.monotonic() - started
        stuck = [j for j, st in statuses.items() if not jobs.is_terminal(st)]
        assert stuck == [], f"{len(stuck)} jobs not terminal {took_s:.0f} s after the first submit"
        session = s.session()
        with ThreadPoolExecutor(16) as pool:
            finals = list(
                pool.map(lambda j: session.get(f"{s.url}/v1/jobs/{j}/result", timeout=30), ids)
            )
        captured |= {
            f"result {j}": r.text + json.dumps(dict(r.headers))
            for j, r in zip(ids, finals, strict=True)
        }
        records = _records(s.redis, ids)
        by_kind: Counter[str] = Counter()
        for (kind, _), record in zip(kinds, records.values(), strict=True):
            by_kind[f"{kind} {record['status']}"] += 1
            assert float(record["completed_at"]) - float(record["started_at"]) <= 31
        completed = sum(1 for r in records.values() if r["status"] == "completed")
        assert by_kind["garbage completed"] == 0, by_kind
        assert completed >= 0.99 * (n_jobs - by_kind["garbage failed"]), by_kind
        assert leases_count(s.redis) == 0
        for job_id in ids[:: max(1, n_jobs // 200)]:
            _assert_events_tell_the_output(s.redis, job_id, records[job_id])
        metrics = [_worker_metrics(p) for p in s.procs if p.name == "worker"]
        captured |= {f"worker metrics {i}": json.dumps(m) for i, m in enumerate(metrics)}
        retries = sum(m.get("chatq_upstream_retries_total", 0) for m in metrics)
        cooldowns = sum(m.get("chatq_upstream_cooldowns_total", 0) for m in metrics)
        assert retries >= 0.25 * n_jobs, retries  # every failure kind is retried
        assert cooldowns >= 1
        captured["web metrics"] = requests.get(f"{s.url}/metrics", timeout=10).text
        print(
            f"chaos: {n_jobs} jobs terminal in {took_s:.1f} s, {completed} completed, "
            f"{retries:.0f} retries, {cooldowns:.0f} cooldowns; {dict(by_kind)}"
        )
    finally:
        s.stop()
    logs = {p.name: p.read_text(errors="replace") for p in sorted(LOG_DIR.glob("*.log"))}
    assert logs, "no process log captured"
    assert _leaks(captured | logs) == []


@pytest.mark.slow
def test_upstream_chaos_2000_jobs_all_terminal_99_percent_completed(
    redis_url: str, own_fakellm: str
) -> None:
    _chaos(redis_url, own_fakellm, 13, 2000)


def test_upstream_chaos_200_jobs_all_terminal_99_percent_completed(
    redis_url: str, own_fakellm: str
) -> None:
    _chaos(redis_url, own_fakellm, 13, 200)
