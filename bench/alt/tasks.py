"""The usual Celery app: a task that calls the upstream, and a trivial one for the baseline.

Configured by ALT_REDIS_URL (broker and result backend), ALT_UPSTREAM_URL, ALT_UPSTREAM_KEY.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import redis
import requests
from celery import Celery
from requests.adapters import HTTPAdapter

REDIS_URL = os.environ.get("ALT_REDIS_URL", "redis://127.0.0.1:6379/0")
UPSTREAM_URL = os.environ.get("ALT_UPSTREAM_URL", "http://127.0.0.1:9100/v1")
UPSTREAM_KEY = os.environ.get("ALT_UPSTREAM_KEY", "")
POOL_SIZE = int(os.environ.get("ALT_POOL_SIZE", "256"))
RESULT_TTL_S = 600

app = Celery("alt", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_default_queue="alt",
    result_expires=RESULT_TTL_S,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)
_lock = threading.Lock()
_shared: dict[str, Any] = {}


def _session() -> requests.Session:
    """One pooled session per process, sized to the worker's concurrency."""
    with _lock:
        if "session" not in _shared:
            session = requests.Session()
            session.mount("http://", HTTPAdapter(pool_maxsize=POOL_SIZE))
            _shared["session"] = session
        return _shared["session"]  # type: ignore[no-any-return]


def redis_client() -> redis.Redis:
    """One Redis client per process, pooled for the worker's concurrency."""
    with _lock:
        if "redis" not in _shared:
            _shared["redis"] = redis.Redis.from_url(REDIS_URL, max_connections=POOL_SIZE + 10)
        return _shared["redis"]  # type: ignore[no-any-return]


@app.task(name="alt.call_llm")
def call_llm(body: dict[str, Any]) -> dict[str, Any]:
    """Call the upstream once, not streamed; the completion goes to the result backend."""
    headers = {"Authorization": f"Bearer {UPSTREAM_KEY}"} if UPSTREAM_KEY else {}
    resp = _session().post(
        f"{UPSTREAM_URL}/chat/completions", json=body, headers=headers, timeout=(5, 120)
    )
    resp.raise_for_status()
    return dict(resp.json())


@app.task(name="alt.write_result", ignore_result=True)
def write_result(job_id: str) -> None:
    """Bare Celery: write our own result hash, expire it, publish, count; no result backend."""
    pipe = redis_client().pipeline(transaction=False)
    pipe.hset(f"alt:job:{job_id}", mapping={"status": "completed", "result": "ok"})
    pipe.expire(f"alt:job:{job_id}", RESULT_TTL_S)
    pipe.publish("alt:notify", job_id)
    pipe.incr("alt:done")
    pipe.execute()
