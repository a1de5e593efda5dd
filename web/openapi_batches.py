"""The Files and Batches part of the OpenAPI document: the paths, merged by document() (their
schemas: web/openapi_batch_schemas.py)."""

from __future__ import annotations

from web.openapi_parts import (
    error_responses,
    json_ref,
    operation,
    param_ref,
    response_object,
    wait_param,
)
from web.openapi_schemas import Schema, ref

_FILE_404 = "`file_not_found`: unknown, expired or foreign file id."
_BATCH_404 = "`batch_not_found`: unknown, expired or foreign batch id."


def _path_id(name: str, prefix: str, description: str) -> Schema:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": f"^{prefix}[A-Za-z0-9_-]+$"},
        "description": description,
    }


_FILE_ID = _path_id("file_id", "file-", "The file's id; another key's file is `404`.")
_BATCH_ID = _path_id("batch_id", "batch_", "The batch's id; another key's batch is `404`.")


def _query(name: str, schema: Schema, description: str) -> Schema:
    return {"name": name, "in": "query", "schema": schema, "description": description}


def _file_collection() -> dict[str, Schema]:
    """POST and GET /v1/files."""
    upload = operation(
        "createFile",
        "Upload a JSONL file of batch requests (multipart)",
        {
            "200": response_object("The file object.", json_ref("File")),
            **error_responses(
                (
                    400,
                    "`invalid_request`, `missing_field`: not multipart, no "
                    "`file` or `purpose`, a `purpose` other than batch, an "
                    "unknown field, a bad `expires_after`, more lines than "
                    "CHATQ_FILES_MAX_LINES; `files_bytes_quota_exceeded`, "
                    "`files_count_quota_exceeded`: the key's files would pass "
                    "CHATQ_FILES_MAX_BYTES_PER_KEY or CHATQ_FILES_MAX_COUNT_PER_KEY.",
                ),
                401,
                (413, "`request_too_large`: the file is over CHATQ_FILES_MAX_BYTES."),
                429,
                503,
            ),
        },
        description="Streamed to the file storage (CHATQ_FILES_DIR), never held in memory.",
    )
    upload["requestBody"] = {
        "required": True,
        "content": {"multipart/form-data": {"schema": ref("FileUpload")}},
    }
    listing = operation(
        "listFiles",
        "The key's files",
        {
            "200": response_object("A page of files.", json_ref("FileList")),
            **error_responses((400, "`invalid_request`: a bad `limit` or `order`."), 401, 429, 503),
        },
        _query("after", {"type": "string"}, "A file id: the page starts after it."),
        _query(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": 10000, "default": 10000},
            "At most this many files.",
        ),
        _query(
            "order",
            {"type": "string", "enum": ["asc", "desc"], "default": "desc"},
            "By creation time.",
        ),
        _query("purpose", {"type": "string"}, "Only files of this purpose."),
    )
    return {"/v1/files": {"post": upload, "get": listing}}


def _file_item() -> dict[str, Schema]:
    """GET and DELETE /v1/files/{file_id}, and its content."""
    get = operation(
        "retrieveFile",
        "A file object",
        {
            "200": response_object("The file object.", json_ref("File")),
            **error_responses(401, (404, _FILE_404), 429, 503),
        },
        _FILE_ID,
    )
    delete = operation(
        "deleteFile",
        "Delete a file",
        {
            "200": response_object("Deleted.", json_ref("FileDeleted")),
            **error_responses(
                401,
                (404, _FILE_404),
                (409, "`file_in_use`: an unfinished batch reads it."),
                429,
                503,
            ),
        },
        _FILE_ID,
    )
    content = operation(
        "downloadFile",
        "A file's bytes",
        {
            "200": response_object(
                "The file, streamed.",
                {"application/octet-stream": {"type": "string", "format": "binary"}},
            ),
            **error_responses(401, (404, _FILE_404), 429, 503),
        },
        _FILE_ID,
    )
    return {
        "/v1/files/{file_id}": {"get": get, "delete": delete},
        "/v1/files/{file_id}/content": {"get": content},
    }


def _batch_collection() -> dict[str, Schema]:
    """POST and GET /v1/batches."""
    create = operation(
        "createBatch",
        "Create a batch on an uploaded file",
        {
            "200": response_object("The batch, `validating`.", json_ref("Batch")),
            **error_responses(
                (
                    400,
                    "`invalid_json`, `invalid_request`, `missing_field`: a field "
                    "missing, of the wrong type or not supported (an endpoint "
                    "other than /v1/chat/completions or /v1/responses, a window "
                    "other than 24h).",
                ),
                401,
                (404, _FILE_404 + " (`input_file_id`)"),
                413,
                (
                    429,
                    "`rate_limit_exceeded`: the key's request rate is over its limit; "
                    "`active_batch_limit_exceeded`: the key has "
                    "CHATQ_BATCH_MAX_ACTIVE_PER_KEY batches not yet ended.",
                ),
                503,
            ),
        },
        body="BatchCreateRequest",
    )
    listing = operation(
        "listBatches",
        "The key's batches, newest first",
        {
            "200": response_object("A page of batches.", json_ref("BatchList")),
            **error_responses((400, "`invalid_request`: a bad `limit`."), 401, 429, 503),
        },
        _query("after", {"type": "string"}, "A batch id: the page starts after it."),
        _query(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            "At most this many batches.",
        ),
    )
    return {"/v1/batches": {"post": create, "get": listing}}


def _batch_item() -> dict[str, Schema]:
    """GET /v1/batches/{batch_id} and its cancel."""
    get = operation(
        "retrieveBatch",
        "A batch, long-polled",
        {
            "200": response_object(
                "The batch (as it is when `wait` runs out, or once ended).",
                json_ref("Batch"),
                "Preference-Applied",
            ),
            **error_responses(
                (400, "`invalid_wait`: `wait` is not a finite number >= 0."),
                401,
                (404, _BATCH_404),
                429,
                503,
            ),
        },
        _BATCH_ID,
        wait_param(0),
        param_ref("Prefer"),
        description="With `wait`, held until the batch has ended (completed, failed, "
        "cancelled or expired) or the wait runs out.",
    )
    cancel = operation(
        "cancelBatch",
        "Cancel a batch",
        {
            "200": response_object(
                "The batch: `cancelling` until its running lines end and "
                "its files are written; an ended batch is left as it is.",
                json_ref("Batch"),
            ),
            **error_responses(401, (404, _BATCH_404), 429, 503),
        },
        _BATCH_ID,
    )
    return {
        "/v1/batches/{batch_id}": {"get": get},
        "/v1/batches/{batch_id}/cancel": {"post": cancel},
    }


def paths() -> dict[str, Schema]:
    """Every Files and Batches path."""
    return {**_file_collection(), **_file_item(), **_batch_collection(), **_batch_item()}
