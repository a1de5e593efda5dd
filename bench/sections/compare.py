"""Issue 6 measure 1: chatq's long-poll against 1 s short polling and Flask + Celery.

The same request straight to the upstream, at the first level only, is what every system's
time is set against: fakellm's "1 s" answer takes a few ms more than 1 s (its timer, the
HTTP exchange), and that part is no system's doing."""

from __future__ import annotations

from bench.alt.stack import alt_env, start_celery, start_gunicorn
from bench.lab import Lab
from bench.loadrun import LoadRun, run_load
from bench.procstat import CpuMeter
from bench.sections.common import JSON, body, breakdown, closed_spec, outcome_summary, target
from tests.procs import UPSTREAM_KEY

UPSTREAM_S = 1.0
MODEL = "fake:ttft=1"
SYNC_WORKERS = 4
GTHREAD_THREADS = 64
ALT_CELERY_SLOTS = 300

STACKS = [("main", {})]


def _held(level: JSON, first_p99_ms: float) -> bool:
    """A level holds with ≤ 1 % errors and p99 added latency within max(1 s, 2 x first p99)."""
    p99 = level["latency"]["p99_ms"]
    errors_ok = level["errors"] <= 0.01 * max(level["jobs"], 1)
    return errors_ok and p99 is not None and p99 <= max(1000.0, 2 * first_p99_ms)


def _ramp(lab: Lab, flow: str, base: str, pids: dict[str, int]) -> JSON:
    """Run each concurrency level until one breaks; answer the levels and where it broke."""
    levels: list[JSON] = []
    broke = None
    for clients in lab.sizes.compare_levels:
        spec = closed_spec(flow, target(base, body(MODEL)), clients, lab.sizes.compare_duration_s)
        meter = CpuMeter(pids).start()
        result = run_load(spec)
        level = {"clients": clients, **outcome_summary(result, UPSTREAM_S)}
        level["cpu"] = meter.stop()
        level["breakdown"] = breakdown(result["outcomes"], UPSTREAM_S)
        first_p99 = (levels[0] if levels else level)["latency"]["p99_ms"] or 0.0
        level["held"] = _held(level, first_p99)
        levels.append(level)
        if not level["held"]:
            broke = clients
            break
    held = [lv["clients"] for lv in levels if lv["held"]]
    return {"levels": levels, "breaks_at": broke, "max_held": max(held, default=None)}


def _direct(lab: Lab) -> JSON:
    """The first level's clients calling the upstream themselves: `/v1/chat/completions`."""
    clients = lab.sizes.compare_levels[0]
    base = lab.fakellm().removesuffix("/v1")
    tgt = target(base, body(MODEL), key=UPSTREAM_KEY)
    result = run_load(closed_spec("front_door", tgt, clients, lab.sizes.compare_duration_s))
    return {"clients": clients, **outcome_summary(result, UPSTREAM_S)}


def _long_jobs(lab: Lab, base: str) -> JSON:
    """Requests per job for a long job: short polling and chatq side by side, at once."""
    job_s = lab.sizes.long_job_s
    tgt = target(base, body(f"fake:ttft={job_s:g}"), wait_s=30)
    runs = {
        flow: LoadRun(
            closed_spec(flow, tgt, lab.sizes.long_job_clients, 600, 0.0, lab.sizes.long_job_clients)
        )
        for flow in ("short_poll", "chatq")
    }
    out: JSON = {"job_s": job_s}
    for flow, run in runs.items():
        summary = outcome_summary(run.result(job_s + 60), job_s)
        out[flow] = {
            "requests_per_job": summary["requests_per_job"],
            "errors": summary["errors"],
            "added": summary["latency"],
        }
    return out


def run(lab: Lab) -> JSON:
    """All three alternatives at rising concurrency, then the long-job request count."""
    chatq = lab.chatq()
    server = lab.redis()
    env = alt_env(server.url, lab.fakellm(), UPSTREAM_KEY, ALT_CELERY_SLOTS)
    celery = lab.track(start_celery(env, "threads", ALT_CELERY_SLOTS))
    gthread, gthread_url = start_gunicorn(env, "gthread", 1, GTHREAD_THREADS)
    sync, sync_url = start_gunicorn(env, "sync", SYNC_WORKERS)
    lab.track(gthread)
    lab.track(sync)
    direct = _direct(lab)
    alt_pids = {"celery": celery.pid, "redis": server.process.pid if server.process else 0}
    systems = {
        "short_poll_1s": _ramp(lab, "short_poll", chatq.url, chatq.pids()),
        "flask_celery_gthread64": _ramp(
            lab, "flask", gthread_url, {"gunicorn": gthread.pid, **alt_pids}
        ),
        "flask_celery_sync4": _ramp(lab, "flask", sync_url, {"gunicorn": sync.pid, **alt_pids}),
        "chatq_longpoll": _ramp(lab, "chatq", chatq.url, chatq.pids()),
    }
    gthread.stop()
    sync.stop()
    celery.stop()
    return {
        "upstream_s": UPSTREAM_S,
        "direct": direct,
        "systems": systems,
        "long_job": _long_jobs(lab, chatq.url),
    }
