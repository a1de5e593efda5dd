"""GET /v1/chat/completions/{id}: a job's chat completion fetched again (OpenAI's stored
completions), so that a client whose held request was cut gets the answer by the
`Chatq-Job-Id` it saw."""

from __future__ import annotations

import re

from flask import Blueprint, Flask, Response, g

from chatq import jobs
from chatq.errors import job_not_found
from chatq.responses import is_response
from web import admission
from web.chat import routes
from web.chat.routes import _hold as hold_completion
from web.context import authorize, services
from web.jobs import load_owned

bp = Blueprint("stored_completions", __name__, url_prefix="/v1/chat/completions")
# A job id, or the id chatq gives a streamed completion (`chatcmpl-` and the job's token).
COMPLETION_ID_PATTERN = "^(?:job_|chatcmpl-)([A-Za-z0-9_-]{16,64})$"
_COMPLETION_ID = re.compile(COMPLETION_ID_PATTERN)


@bp.get("/<completion_id>")
def stored_completion(completion_id: str) -> Response:
    """The job's `chat.completion` once it ends (held as POST /v1/chat/completions holds);
    its OpenAI error if it failed; 404 for a response (its own view is /v1/responses)."""
    svc = services()
    owner = authorize(svc)
    match = _COMPLETION_ID.fullmatch(completion_id)
    if match is None:
        raise job_not_found()
    job_id = g.chatq_job_id = "job_" + match.group(1)
    record = load_owned(svc, job_id, owner)
    if is_response(record):
        raise job_not_found()
    if not jobs.is_terminal(record["status"]) and admission.holds_open(
        False, svc.settings.max_wait_s
    ):
        admission.hold(svc.held, owner)
    return hold_completion(svc, record)


def register(app: Flask) -> None:
    """The chat endpoints: OpenAI's front door, and its stored completions."""
    app.register_blueprint(routes.bp)
    app.register_blueprint(bp)
