"""The usual Flask view over Celery: start the task, block on `AsyncResult.get()`."""

from __future__ import annotations

from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout
from celery.result import AsyncResult
from flask import Flask, jsonify, request

from bench.alt.tasks import app as celery_app
from bench.alt.tasks import call_llm

app = Flask(__name__)


@app.post("/chat")
def chat() -> Any:
    """Run one chat completion and answer it: the thread is held until the task ends."""
    body = request.get_json(force=True)
    try:
        return jsonify(call_llm.delay(body).get(timeout=60))
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


@app.get("/healthz")
def healthz() -> Any:
    """200 while the process runs."""
    return jsonify({"status": "ok"})
