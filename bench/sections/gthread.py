"""The same parked waiters against Flask + `AsyncResult.get()` under gunicorn gthread (64)."""

from __future__ import annotations

from bench.alt.stack import alt_env, start_gunicorn
from bench.completer import celery_finisher, celery_ids
from bench.lab import Lab
from bench.sections.common import JSON
from bench.sections.waiters import PROBE_GRACE_S, measure_level
from tests.procs import UPSTREAM_KEY

THREADS = 64


def run(lab: Lab) -> JSON:
    """Levels of parked `AsyncResult.get()` calls plus one probe; a probe past the threads waits."""
    server = lab.redis()
    env = alt_env(server.url, lab.fakellm(), UPSTREAM_KEY, THREADS)
    proc, url = start_gunicorn(env, "gthread", 1, THREADS)
    lab.track(proc)
    finish = celery_finisher(server.url)
    redis_pid = server.process.pid if server.process else 0
    levels = []
    for count in lab.sizes.gthread_levels:
        runs = celery_ids(count + 1)
        levels.append(
            measure_level(
                lab,
                url,
                "flask",
                proc.pid,
                {"gunicorn": proc.pid, "redis": redis_pid},
                runs,
                count,
                finish,
                lab.sizes.waiter_rate_per_s,
            )
        )
    proc.stop()
    ok = [lv["waiters"] + lv["probes"] for lv in levels if lv["probe"]["answered_in_grace"]]
    return {
        "threads": THREADS,
        "levels": levels,
        "probe_grace_s": PROBE_GRACE_S,
        "max_parked": max(ok, default=0),
    }
