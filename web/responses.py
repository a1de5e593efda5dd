"""Building the JSON answers of the API."""

from __future__ import annotations

import json
from typing import Any

from flask import Response

from chatq import jobs
from chatq.errors import ApiError, failed_job_status


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response with a Content-Length (never chunked, for HTTP/1.0 clients)."""
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    return Response(data, status=status, headers=headers, mimetype="application/json")


def job_response(record: dict[str, str], wait_s: float | None = None) -> Response:
    """200 with the job once terminal, else 202 with its current state and Location."""
    view = jobs.public_view(record)
    headers: dict[str, str] = {}
    if wait_s is not None:
        headers["Preference-Applied"] = f"wait={wait_s:g}"
    if jobs.is_terminal(view["status"]):
        return json_response(view, 200, headers)
    headers["Location"] = f"/v1/jobs/{view['id']}"
    return json_response(view, 202, headers)


def failed_job_error(record: dict[str, str]) -> ApiError:
    """The OpenAI error for a failed or cancelled job, with a fitting status."""
    view = jobs.public_view(record)
    if view["status"] == jobs.CANCELLED:
        return ApiError(409, "job_cancelled", "The job was cancelled.", type_="job_cancelled")
    error = view["error"] or {}
    code = error.get("code") or "upstream_error"
    status = int(record.get("error_status") or failed_job_status(code))
    return ApiError(
        status,
        code,
        error.get("message") or "The job failed.",
        type_=error.get("type") or "upstream_error",
    )
