"""OpenAI's Responses API (text subset) as chatq jobs."""

from chatq.responses.events import FINAL_EVENT, EventMaker
from chatq.responses.inputs import JSONDict, checked_request, invalid, unsupported
from chatq.responses.objects import (
    STATUSES,
    STREAM_EVENTS,
    Metadata,
    ResponseDeleted,
    ResponseErrorEvent,
    ResponseRequest,
    ResponseUsage,
)
from chatq.responses.translation import (
    CAPPED,
    ID_PATTERN,
    conversation,
    given,
    is_response,
    is_stored,
    job_id_of,
    response_id,
    translate,
)
from chatq.responses.view import render

__all__ = [
    "CAPPED",
    "FINAL_EVENT",
    "ID_PATTERN",
    "STATUSES",
    "STREAM_EVENTS",
    "EventMaker",
    "JSONDict",
    "Metadata",
    "ResponseDeleted",
    "ResponseErrorEvent",
    "ResponseRequest",
    "ResponseUsage",
    "checked_request",
    "conversation",
    "given",
    "invalid",
    "is_response",
    "is_stored",
    "job_id_of",
    "render",
    "response_id",
    "translate",
    "unsupported",
]
