"""A response's job record rendered as OpenAI's Response object (its published schema).

Statuses: the job's, except that a completed job cut short (`finish_reason` length or
content_filter) is `incomplete` with `incomplete_details.reason`. No Flask here.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from msgspec import UNSET

from chatq import jobs
from chatq.responses.inputs import JSONDict
from chatq.responses.objects import Response
from chatq.responses.translation import asked, message_id, response_id

INCOMPLETE = "incomplete"
INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
# A message item's status, by the response's.
ITEM_STATUS = {jobs.COMPLETED: "completed", jobs.IN_PROGRESS: "in_progress"}
# OpenAI's ResponseErrorCode is a closed list: a failed job's own code goes in the message.
_ERROR_CODE_BY_STATUS = {
    429: "rate_limit_exceeded",
    400: "invalid_prompt",
    413: "invalid_prompt",
    422: "invalid_prompt",
}


def _json(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def status_of(record: dict[str, str]) -> str:
    """The Response status of a job record."""
    status = record.get("status", jobs.QUEUED)
    if status == jobs.COMPLETED and record.get("finish_reason") in INCOMPLETE_REASONS:
        return INCOMPLETE
    return status


def text_part(text: str) -> JSONDict:
    """An `output_text` content part."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, status: str, parts: list[JSONDict]) -> JSONDict:
    """An assistant output message."""
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": parts,
    }


def item_status(response_status: str) -> str:
    """The status of the output message of a response in `response_status`."""
    return ITEM_STATUS.get(response_status, INCOMPLETE)


def _parts(record: dict[str, str], text: str) -> list[JSONDict]:
    parts = [text_part(text)]
    result = _json(record.get("result")) or {}
    message = ((result.get("choices") or [{}])[0] or {}).get("message") or {}
    if message.get("refusal"):
        parts.append({"type": "refusal", "refusal": str(message["refusal"])})
    return parts


def output_of(record: dict[str, str], status: str, item_id: str) -> list[JSONDict]:
    """The response's output: one assistant message once there is text (or it completed)."""
    text = record.get("output_text", "")
    if status == jobs.QUEUED or not (text or status in (jobs.COMPLETED, INCOMPLETE)):
        return []
    return [message_item(item_id, item_status(status), _parts(record, text))]


def usage_of(record: dict[str, str]) -> JSONDict | None:
    """The upstream's usage, in the Responses API's names; None when it gave none."""
    usage = (_json(record.get("result")) or {}).get("usage")
    if not isinstance(usage, dict):
        return None
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    input_tokens = int(usage.get("prompt_tokens") or 0)
    output_tokens = int(usage.get("completion_tokens") or 0)
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": int(prompt_details.get("cached_tokens") or 0)},
        "output_tokens": output_tokens,
        "output_tokens_details": {
            "reasoning_tokens": int(completion_details.get("reasoning_tokens") or 0)
        },
        "total_tokens": int(usage.get("total_tokens") or input_tokens + output_tokens),
    }


def error_of(record: dict[str, str]) -> JSONDict | None:
    """A failed job's error as OpenAI's ResponseError: its own code leads the message."""
    if record.get("status") != jobs.FAILED:
        return None
    error = _json(record.get("error")) or {}
    own = str(error.get("code") or "upstream_error")
    status = int(record.get("error_status") or 0)
    code = (
        "invalid_prompt"
        if own == "context_length_exceeded"
        else _ERROR_CODE_BY_STATUS.get(status, "server_error")
    )
    return {"code": code, "message": f"{own}: {error.get('message') or 'the job failed'}"}


def _incomplete_details(record: dict[str, str], status: str) -> JSONDict | None:
    if status != INCOMPLETE:
        return None
    return {"reason": INCOMPLETE_REASONS[record.get("finish_reason", "length")]}


def snapshot(record: dict[str, str], status: str) -> JSONDict:
    """The Response as it stands in `status`, before any output: what never changes."""
    how = asked(record)
    return {
        "id": response_id(record["id"]),
        "object": "response",
        "created_at": int(float(record.get("created_at") or 0)),
        "status": status,
        "background": bool(how.get("background")),
        "completed_at": None,
        "error": None,
        "incomplete_details": None,
        "instructions": how.get("instructions"),
        "max_output_tokens": how.get("max_output_tokens"),
        "model": record.get("model", ""),
        "output": [],
        "parallel_tool_calls": True,
        "previous_response_id": how.get("previous_response_id"),
        "reasoning": None,
        "temperature": how.get("temperature"),
        "text": how.get("text") or {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": how.get("top_p"),
        "truncation": how.get("truncation") or "disabled",
        "metadata": how.get("metadata") or {},
    }


def render(record: dict[str, str], item_id: str | None = None) -> JSONDict:
    """The Response object of a job record (`item_id`: its message's id, if not the usual)."""
    status = status_of(record)
    output = output_of(record, status, item_id or message_id(record["id"]))
    completed_at = record.get("completed_at") if status == jobs.COMPLETED else ""
    response = {
        **snapshot(record, status),
        "completed_at": int(float(completed_at)) if completed_at else None,
        "error": error_of(record),
        "incomplete_details": _incomplete_details(record, status),
        "output": output,
        "output_text": "".join(p.get("text", "") for item in output for p in item["content"]),
    }
    # The schema's `usage` is an object, not nullable: absent until the upstream gave one.
    usage = usage_of(record) or UNSET
    return msgspec.to_builtins(Response(**response, usage=usage))  # type: ignore[arg-type,no-any-return]
