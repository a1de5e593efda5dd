"""One line of a batch: checking an input line, and the output or error line it becomes.

Input lines are OpenAI's `{"custom_id", "method": "POST", "url", "body"}` (BatchRequestInput,
chatq/batches/objects.py); output lines are
`{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`. What a
line's body must be depends on the batch's endpoint: one entry of ENDPOINTS each.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_args

from chatq import chat
from chatq.batches.objects import BatchEndpoint, BatchRequestInput
from chatq.chat import Refused, chat_request, convert
from chatq.config import Settings
from chatq.errors import ApiError, failed_job_status
from chatq.responses import checked_request, given, invalid, is_response, render, translate
from chatq.runtime import Tally

JSONDict = dict[str, Any]
OUTPUT, ERROR = "o", "e"
CANCELLED_CODE, EXPIRED_CODE, LOST_CODE = "batch_cancelled", "batch_expired", "request_lost"
ENDED_MESSAGES = {
    CANCELLED_CODE: "The batch was cancelled before this request ran.",
    EXPIRED_CODE: "This request could not be executed before the completion window expired.",
    LOST_CODE: "This request's job is gone (deleted, or lost with Redis's data) before its "
    "end was recorded.",
}


class TooLong(bytes):
    """What the file's readers yield for a line longer than CHATQ_MAX_BODY_BYTES, read past
    without being held: no line read from a file is one."""


LINE_TOO_LONG = TooLong()


# A line's request as its job holds it: the chat request sent upstream, and the job
# record's extra fields (a response's `api` and `response`).
Checked = tuple[JSONDict, dict[str, str]]


def _no_stream() -> ApiError:
    return ApiError(400, "invalid_request", "`stream` is not allowed in a batch.", param="stream")


def _chat_body(body: JSONDict, settings: Settings) -> Checked:
    """A /v1/chat/completions body as the upstream gets it; ApiError when it is refused."""
    if body.get("stream") is True:
        raise _no_stream()
    request = chat_request(body, settings)
    request.pop("stream", None)
    return request, {}


def _responses_body(body: JSONDict, settings: Settings) -> Checked:
    """A /v1/responses body as the job POST /v1/responses makes of it; ApiError when the
    Responses API refuses it, or when it asks for what a batch line cannot do."""
    req = checked_request(body)
    asked = translate(req, settings)
    if asked.stream:
        raise _no_stream()
    if given(req.previous_response_id) is not None:
        raise invalid(
            "`previous_response_id` is not supported in a batch: each line is a "
            "response of its own.",
            "previous_response_id",
            "unsupported_parameter",
        )
    if asked.truncate:
        # The web trims a prompt to fit; the batch's workers count no tokens.
        raise invalid(
            "`truncation` must be disabled in a batch: no prompt is trimmed to fit.",
            "truncation",
            "unsupported_parameter",
        )
    return chat_request(asked.request, settings), asked.fields


# The endpoints a batch may name, each with the check of its lines' bodies.
CHAT, RESPONSES = get_args(BatchEndpoint)
ENDPOINTS: dict[str, Callable[[JSONDict, Settings], Checked]] = {
    CHAT: _chat_body,
    RESPONSES: _responses_body,
}


def line_token(batch_id: str, line: int) -> str:
    """32 url-safe characters naming line `line` of a batch, the same every time."""
    digest = hashlib.sha256(f"{batch_id}:{line}".encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()[:32]


def line_job_id(batch_id: str, line: int) -> str:
    """The id of the job that runs a line: one per line, whoever makes it and how often."""
    return "job_" + line_token(batch_id, line)


@dataclass(frozen=True)
class Line:
    """A valid input line: its number (from 1), its custom_id, the request to run and the
    extra fields of its job's record."""

    number: int
    custom_id: str
    request: JSONDict
    fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LineError:
    """Why an input line cannot run."""

    number: int
    code: str
    message: str
    param: str | None = None
    custom_id: str | None = None

    def batch_error(self) -> JSONDict:
        """OpenAI's BatchError, for the batch object's `errors`."""
        return {
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "line": self.number,
        }


def _envelope(number: int, raw: bytes, max_line_bytes: int) -> JSONDict | LineError:
    if isinstance(raw, TooLong):
        return LineError(
            number,
            "request_too_large",
            f"This line is longer than {max_line_bytes} bytes (CHATQ_MAX_BODY_BYTES, the "
            "largest request body chatq takes).",
        )
    try:
        value = chat.parse(raw.decode("utf-8"))
    except ApiError as exc:  # JSON, but a number or a string no request can carry
        return LineError(number, exc.code, exc.message, exc.param)
    except chat.NestedTooDeeply as exc:
        return LineError(number, "invalid_json_line", f"This line {exc}.")
    except (UnicodeDecodeError, ValueError):
        return LineError(number, "invalid_json_line", "This line is not valid JSON in UTF-8.")
    if not isinstance(value, dict):
        return LineError(number, "invalid_json_line", "This line is not a JSON object.")
    return value


# The code of a line whose field its struct refused: by the field (else the converter's),
# and one for a field missing.
_CODES = {"custom_id": "invalid_custom_id", "method": "invalid_method", "url": "url_mismatch"}
_MISSING = "missing_required_parameter"


def _url_mismatch(number: int, endpoint: str, custom_id: str | None) -> LineError:
    message = f"`url` must be this batch's endpoint, {endpoint}."
    return LineError(number, _CODES["url"], message, "url", custom_id)


def _refused(number: int, line: JSONDict, endpoint: str, refused: Refused) -> LineError:
    """The error of a line its struct refused: a custom_id it holds is the error's, unless
    the custom_id is what was refused."""
    param = refused.param or ""
    custom_id = None if param == "custom_id" else line.get("custom_id")
    if refused.code == "missing_field":
        return LineError(number, _MISSING, refused.message, param, custom_id)
    if param == "url":
        return _url_mismatch(number, endpoint, custom_id)
    return LineError(number, _CODES.get(param, refused.code), refused.message, param, custom_id)


def _checked(number: int, line: JSONDict, endpoint: str) -> BatchRequestInput | LineError:
    """The line as its struct, or why it is not one of this batch's."""
    if next(iter(line), None) != "custom_id" and "custom_id" in line:
        # msgspec checks fields in the order given, up to the first it refuses: custom_id
        # first, so that a bad one is the error, and any other error has it.
        line = {"custom_id": line["custom_id"], **line}
    try:
        checked = convert(line, BatchRequestInput)
    except Refused as refused:
        return _refused(number, line, endpoint, refused)
    if checked.url != endpoint:
        return _url_mismatch(number, endpoint, checked.custom_id)
    return checked


_tally = Tally()


def lines_parsed() -> int:
    """How many input lines this process has parsed (each call of parse_line is one)."""
    return _tally.count


def parse_line(raw: bytes, number: int, endpoint: str, settings: Settings) -> Line | LineError:
    """The line `number` of an input file, checked for a batch on `endpoint`."""
    _tally.add()
    line = _envelope(number, raw, settings.max_body_bytes)
    if isinstance(line, LineError):
        return line
    checked = _checked(number, line, endpoint)
    if isinstance(checked, LineError):
        return checked
    try:
        request, fields = ENDPOINTS[endpoint](checked.body, settings)
    except ApiError as exc:
        param = f"body.{exc.param}" if exc.param else "body"
        return LineError(number, exc.code, exc.message, param, checked.custom_id)
    return Line(number, checked.custom_id, request, fields)


def _dumps(value: JSONDict) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _line(
    batch_id: str,
    number: int,
    custom_id: str | None,
    response: JSONDict | None,
    error: JSONDict | None,
) -> str:
    return _dumps(
        {
            "id": "batch_req_" + line_token(batch_id, number),
            "custom_id": custom_id,
            "response": response,
            "error": error,
        }
    )


def invalid_line(batch_id: str, error: LineError) -> str:
    """The error-file line of an input line that failed validation."""
    message = f"Line {error.number}: {error.message}"
    return _line(
        batch_id, error.number, error.custom_id, None, {"code": error.code, "message": message}
    )


def ended_line(batch_id: str, number: int, custom_id: str | None, code: str) -> str:
    """The error-file line of a request the batch's cancel or expiry stopped (or lost)."""
    return _line(batch_id, number, custom_id, None, {"code": code, "message": ENDED_MESSAGES[code]})


def usage_of(completion: JSONDict) -> tuple[int, int, int, int]:
    """(input, cached input, output, reasoning) tokens of a chat.completion's usage."""
    usage = completion.get("usage") or {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    output_details = usage.get("completion_tokens_details") or {}
    return (
        int(usage.get("prompt_tokens") or 0),
        int(prompt_details.get("cached_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        int(output_details.get("reasoning_tokens") or 0),
    )


def job_line(
    batch_id: str, number: int, record: dict[str, str]
) -> tuple[str, str, tuple[int, int, int, int]]:
    """(OUTPUT or ERROR, the line, its token usage) for a line whose job completed or failed."""
    custom_id, job_id = record.get("custom_id"), record["id"]
    if record.get("status") == "completed":
        completion = json.loads(record.get("result") or "{}")
        # A response's line carries its Response object, as GET /v1/responses/{id} shows it.
        body = render(record) if is_response(record) else completion
        response = {"status_code": 200, "request_id": job_id, "body": body}
        return OUTPUT, _line(batch_id, number, custom_id, response, None), usage_of(completion)
    error = json.loads(record.get("error") or "{}")
    status = int(record.get("error_status") or failed_job_status(error.get("code")))
    body = {
        "error": {
            "message": error.get("message") or "The request failed.",
            "type": error.get("type") or "upstream_error",
            "param": None,
            "code": error.get("code") or "upstream_error",
        }
    }
    response = {"status_code": status, "request_id": job_id, "body": body}
    return ERROR, _line(batch_id, number, custom_id, response, None), (0, 0, 0, 0)
