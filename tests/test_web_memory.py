"""The token encodings are built once, by gunicorn's master before it forks, and shared.

o200k_base takes about 75 MiB: built in each web process it was most of a process's memory.
"""

from __future__ import annotations

import psutil
import requests

from tests.conftest import Stack
from tests.procs import base_env, start_web

MiB = 2**20


def test_web_processes_share_the_encoding_the_master_built(stack: Stack) -> None:
    # gpt-4o-mini counts with o200k_base; a tiny context limit answers 422 after counting, so
    # that no job is queued.
    env = base_env(
        stack.env["CHATQ_REDIS_URL"],
        "http://127.0.0.1:9/v1",
        CHATQ_DEFAULT_MODEL="gpt-4o-mini",
        CHATQ_MAX_CONTEXT_TOKENS="5",
    )
    web, url = start_web(env)
    try:
        session = requests.Session()
        session.headers["Authorization"] = stack.session().headers["Authorization"]
        body = {"messages": [{"role": "user", "content": "count these tokens, all of them"}]}
        answer = session.post(f"{url}/v1/jobs", json=body, timeout=10)
        assert answer.json()["error"]["code"] == "context_length_exceeded", answer.text
        (worker,) = psutil.Process(web.pid).children()
        memory = worker.memory_full_info()
        # Pages it shares with the master (copy-on-write since the fork): the encoding's.
        assert memory.rss - memory.uss >= 60 * MiB, (memory.rss // MiB, memory.uss // MiB)
    finally:
        web.stop()
