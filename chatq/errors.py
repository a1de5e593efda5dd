"""The one error shape of the API, OpenAI's, for every 4xx and 5xx."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error answered to the client as `{"error": {...}}` with an HTTP status."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        type_: str = "invalid_request_error",
        param: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.type = type_
        self.param = param
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        """The JSON body, OpenAI's error object."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def job_not_found() -> ApiError:
    """The answer for an unknown, expired or foreign job: all look the same."""
    return ApiError(404, "job_not_found", "No job with that id.", param="id")


def backend_unavailable(retry_after_s: int) -> ApiError:
    """The answer while Redis cannot be reached."""
    return ApiError(
        503,
        "backend_unavailable",
        "The job store is unavailable; retry shortly.",
        type_="server_error",
        retry_after_s=retry_after_s,
    )


# HTTP status to answer for a failed job, by its error code.
FAILED_JOB_STATUS = {
    "upstream_timeout": 504,
    "context_length_exceeded": 422,
    "worker_lost": 502,
    "invalid_request": 400,
}


def failed_job_status(code: str | None) -> int:
    """The status that fits a failed job's error code; 502 for the upstream's faults."""
    return FAILED_JOB_STATUS.get(code or "", 502)
