"""The job endpoints: submit, status, result, cancel, events, long-polling."""

from web.jobs.events import SSE_KEEPALIVE, STREAM_ENDING_ERRORS, follow, sse_response
from web.jobs.routes import register
from web.jobs.submission import enqueue_detached, job_id_for, submit
from web.jobs.waiting import before_park, load_owned, wait_terminal, watching

__all__ = [
    "SSE_KEEPALIVE",
    "STREAM_ENDING_ERRORS",
    "before_park",
    "enqueue_detached",
    "follow",
    "job_id_for",
    "load_owned",
    "register",
    "sse_response",
    "submit",
    "wait_terminal",
    "watching",
]
