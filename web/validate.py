"""Checking a chat-completion request before it becomes a job: see chatq/validate.py, where
the checks live so that a worker can run them too (the lines of a batch)."""

from chatq.validate import (
    CAPPED,
    FIELD_TYPES,
    LOGIT_BIAS_RANGE,
    MAX_STOP_SEQUENCES,
    RANGES,
    chat_request,
    within_context,
)

__all__ = ["CAPPED", "FIELD_TYPES", "LOGIT_BIAS_RANGE", "MAX_STOP_SEQUENCES", "RANGES",
           "chat_request", "within_context"]
