"""The usual Flask view over Celery: start the task, block on `AsyncResult.get()`. With
ALT_TASKS=tuned, `/chat` runs the same call on chatq's Celery settings
(bench/alt/tuned_tasks.py)."""

from __future__ import annotations

import os
import time
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from celery.result import AsyncResult
from flask import Flask, jsonify, request

from bench.alt.tasks import app as celery_app
from bench.alt.tasks import call_llm

app = Flask(__name__)
TUNED = os.environ.get("ALT_TASKS") == "tuned"


def _started(body: dict[str, Any]) -> AsyncResult:
    if TUNED:
        from bench.alt import tuned_tasks

        return tuned_tasks.call_llm.apply_async((body,), queue=tuned_tasks.QUEUE)
    return call_llm.delay(body)


@app.post("/chat")
def chat() -> Any:
    """Run one chat completion and answer it: the thread is held until the task ends."""
    body = request.get_json(force=True)
    try:
        return jsonify(_started(body).get(timeout=60))
    except CeleryTimeout:
        return jsonify({"error": "timeout"}), 504


@app.get("/wait/<task_id>")
def wait(task_id: str) -> Any:
    """Block on an existing task's result, up to `?timeout=` seconds."""
    timeout_s = float(request.args.get("timeout", "30"))
    try:
        value = AsyncResult(task_id, app=celery_app).get(timeout=timeout_s)
    except CeleryTimeout:
        return jsonify({"error": "timeout"}), 504
    return jsonify({"ok": True, "result": value})


@app.post("/hold")
def hold() -> Any:
    """Wait `?seconds=` (1 by default) and answer the body's model, touching neither Celery
    nor Redis: a view's own floor on this server, for bench/added.py."""
    body = request.get_json(force=True)
    time.sleep(float(request.args.get("seconds", "1")))
    return jsonify({"model": body.get("model"), "held": True})


@app.get("/healthz")
def healthz() -> Any:
    """200 while the process runs."""
    return jsonify({"status": "ok"})
