"""Starting the alternative: a Celery worker, and the Flask app under gunicorn."""

from __future__ import annotations

import os

import requests

from scripts.localredis import free_port
from tests.procs import Proc, wait_until


def alt_env(redis_url: str, upstream: str, key: str, pool_size: int) -> dict[str, str]:
    """The environment of the alternative's processes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALT_")}
    env.update(
        ALT_REDIS_URL=redis_url,
        ALT_UPSTREAM_URL=upstream,
        ALT_UPSTREAM_KEY=key,
        ALT_POOL_SIZE=str(pool_size),
        PYTHONUNBUFFERED="1",
    )
    return env


def start_celery(
    env: dict[str, str],
    pool: str,
    concurrency: int,
    app: str = "bench.alt.tasks",
    queues: str = "alt",
) -> Proc:
    """`celery worker` on one of the alternative's apps; returns once it is ready."""
    args = [
        "celery",
        "-A",
        app,
        "worker",
        f"--pool={pool}",
        f"--concurrency={concurrency}",
        "-Q",
        queues,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel=INFO",
    ]
    proc = Proc(f"alt-celery-{pool}", args, env).start()
    wait_until(lambda: "ready." in proc.log_text(), 30, "alt celery worker ready")
    return proc


def start_gunicorn(
    env: dict[str, str], worker_class: str, workers: int, threads: int = 1
) -> tuple[Proc, str]:
    """The Flask app under gunicorn with `worker_class` (sync, gthread or gevent); (process,
    URL)."""
    port = free_port()
    args = [
        "gunicorn",
        "-k",
        worker_class,
        "-w",
        str(workers),
        "--threads",
        str(threads),
        "--timeout",
        "120",
        "--backlog",
        "4096",
        "-b",
        f"127.0.0.1:{port}",
        "bench.alt.web:app",
    ]
    proc = Proc(f"alt-{worker_class}", args, env).start()
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: requests.get(url + "/healthz", timeout=1).ok, 30, "alt gunicorn")
    return proc, url
