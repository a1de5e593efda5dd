"""The one error shape of the API, OpenAI's, for every 4xx and 5xx."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta, Struct, structs


class ErrorDetail(Struct, forbid_unknown_fields=True):
    """What went wrong, for people (`message`) and for programs (`code`)."""

    message: Annotated[str, Meta(description="A sentence for people.")]
    type: Annotated[str, Meta(examples=["invalid_request_error", "server_error"])]
    param: Annotated[
        str | None, Meta(description="The request field or header at fault, if one is.")
    ]
    code: Annotated[
        str | None, Meta(description="A stable machine-readable code; see each response.")
    ]


class Error(Struct, forbid_unknown_fields=True):
    """OpenAI's error object: the body of every 4xx and 5xx."""

    error: ErrorDetail


class JobError(Struct, forbid_unknown_fields=True):
    """Why a job failed; never a traceback, never a secret."""

    type: str
    code: Annotated[
        str, Meta(examples=["upstream_error", "upstream_timeout", "upstream_invalid_response"])
    ]
    message: str


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
        detail = ErrorDetail(self.message, self.type, self.param, self.code)
        return {"error": structs.asdict(detail)}


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


# Error codes of failed jobs that no upstream status explains.
UPSTREAM_TIMEOUT = "upstream_timeout"
UPSTREAM_INVALID_RESPONSE = "upstream_invalid_response"
INTERNAL_ERROR = "internal_error"

# HTTP status to answer for a failed job no upstream answered, by its error code
# (timeouts are 504 whatever answered).
FAILED_JOB_STATUS = {
    "context_length_exceeded": 422,
    "worker_lost": 502,
    "invalid_request": 400,
    UPSTREAM_INVALID_RESPONSE: 502,
    INTERNAL_ERROR: 502,
}

# Upstream 4xx answers passed on to the client as they are; the rest are chatq's gateway
# errors (our credentials refused, conflicts, 5xx: 502; timeouts: 504).
PASSED_ON = frozenset({400, 404, 413, 422, 429})


def failed_job_status(code: str | None, upstream_status: int = 0) -> int:
    """A failed job's HTTP status; `upstream_status` is 0 when no upstream answered."""
    if code == UPSTREAM_TIMEOUT or upstream_status in (408, 504):
        return 504
    if upstream_status:
        return upstream_status if upstream_status in PASSED_ON else 502
    return FAILED_JOB_STATUS.get(code or "", 502)
