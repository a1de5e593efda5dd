"""The objects of the Files and Batches APIs as chatq serves them (OpenAI's OpenAIFile and
Batch, for the subset chatq serves), each declared once: chatq/batches/file_records.py and
chatq/batches/record.py build them, and the OpenAPI components are generated from them."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from chatq.responses import Metadata, ResponseUsage

BatchStatus = Literal[
    "validating",
    "failed",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "cancelling",
    "cancelled",
]
STATUSES: tuple[str, ...] = get_args(BatchStatus)
# The endpoints a batch may name (chatq/batches/lines.py checks each one's lines).
BatchEndpoint = Literal["/v1/chat/completions", "/v1/responses"]
MAX_CUSTOM_ID_CHARS = 512
Purpose = Literal["batch", "batch_output"]
PURPOSE_INPUT, PURPOSE_OUTPUT = get_args(Purpose)
Count = Annotated[int, Meta(ge=0)]
Stamp = int | None
# OpenAI's bounds of `expires_after[seconds]`: an hour to 30 days.
EXPIRES_MIN_S, EXPIRES_MAX_S = 3600, 2592000
ExpirySeconds = Annotated[int, Meta(ge=EXPIRES_MIN_S, le=EXPIRES_MAX_S)]


class _Closed(Struct, forbid_unknown_fields=True):
    """A closed object: a field not declared is refused."""


class File(_Closed):
    """OpenAI's file object."""

    id: str
    object: Literal["file"]
    bytes: Count
    created_at: int
    expires_at: Annotated[int | None, Meta(description="When the file is deleted (Unix seconds).")]
    filename: str
    purpose: Purpose
    status: Literal["processed"]


class FileUpload(_Closed, kw_only=True):
    """The multipart form of POST /v1/files."""

    file: Annotated[str, Meta(extra_json_schema={"format": "binary"})]
    purpose: Literal["batch"]
    anchor: Literal["created_at"] | UnsetType = field(default=UNSET, name="expires_after[anchor]")
    seconds: Annotated[ExpirySeconds, Meta(description="Default: CHATQ_FILES_TTL.")] | (
        UnsetType
    ) = field(default=UNSET, name="expires_after[seconds]")


class FileDeleted(_Closed):
    """DELETE /v1/files/{file_id}."""

    id: str
    object: Literal["file"]
    deleted: bool


class _Page(_Closed):
    """A page of a list, newest first: `last_id` is `after` for the next page."""

    object: Literal["list"]
    first_id: Annotated[str | None, Meta(description="The first id of the page.")]
    last_id: Annotated[str | None, Meta(description="The last id: `after` for the next page.")]
    has_more: bool


class FileList(_Page):
    data: list[File]


class BatchError(_Closed):
    """Why a batch failed, or one of its lines (`line`) was refused."""

    code: str
    message: str
    param: str | None
    line: int | None


class BatchErrors(_Closed):
    object: Literal["list"]
    data: list[BatchError]


class RequestCounts(_Closed):
    total: Count
    completed: Count
    failed: Count


class Batch(_Closed, kw_only=True):
    """OpenAI's batch object."""

    id: str
    object: Literal["batch"]
    endpoint: str
    errors: BatchErrors | None
    input_file_id: str
    completion_window: str
    status: BatchStatus
    output_file_id: str | None
    error_file_id: str | None
    created_at: Stamp
    in_progress_at: Stamp
    expires_at: Stamp
    finalizing_at: Stamp
    completed_at: Stamp
    failed_at: Stamp
    expired_at: Stamp
    cancelling_at: Stamp
    cancelled_at: Stamp
    request_counts: RequestCounts
    usage: ResponseUsage
    metadata: dict[str, str] | None
    model: Annotated[str, Meta(description="The model of the first valid line.")] | UnsetType = (
        UNSET
    )


TIMESTAMPS = tuple(name for name in Batch.__struct_fields__ if name.endswith("_at"))


class BatchList(_Page):
    data: list[Batch]


def page_view(kind: type[FileList | BatchList], data: list[Any], has_more: bool) -> Any:
    """A page of `kind` holding `data` (the objects' views), as the API shows it."""
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    listed = kind(object="list", first_id=first, last_id=last, has_more=has_more, data=data)
    return msgspec.to_builtins(listed)


class OutputExpiresAfter(_Closed):
    anchor: Literal["created_at"]
    seconds: ExpirySeconds


class BatchRequestInput(Struct):
    """One line of a batch's input file (OpenAI's BatchRequestInput); other fields are
    ignored. chatq/batches/lines.py checks each line through it."""

    custom_id: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=MAX_CUSTOM_ID_CHARS,
            description="Names the line's output; unique in the file.",
        ),
    ]
    method: Literal["POST"]
    url: Annotated[BatchEndpoint, Meta(description="The batch's endpoint.")]
    body: Annotated[
        dict[str, Any], Meta(description="A request to `url`, checked as `url` checks it.")
    ]


class BatchCreateRequest(_Closed, kw_only=True):
    """POST /v1/batches."""

    input_file_id: str
    endpoint: Annotated[
        BatchEndpoint,
        Meta(
            description="The `url` of every line; a line's `body` is a request to it "
            "(/v1/responses: the Responses API's text subset)."
        ),
    ]
    completion_window: Annotated[
        Literal["24h"], Meta(description="Lasts CHATQ_BATCH_WINDOW seconds (24 h).")
    ]
    metadata: Metadata | UnsetType | None = UNSET
    output_expires_after: OutputExpiresAfter | UnsetType = UNSET
