"""The Files and Batches part of the OpenAPI document: their operations, one table (their
objects: chatq/batches/objects.py)."""

from __future__ import annotations

from chatq.batches import BATCH_ID, FILE_ID
from web.http import (
    BATCHES_AFTER,
    BATCHES_LIMIT,
    FILES_AFTER,
    FILES_LIMIT,
    FILES_ORDER,
    FILES_PURPOSE,
    PREFER,
    PREFERENCE_APPLIED,
    WAIT,
)
from web.openapi import parts
from web.openapi.parts import BAD_WAIT, Op, path_id, response_object
from web.openapi.schemas import Schema, ref

_FILE_ID = path_id("file_id", FILE_ID.pattern, "The file's id; another key's file is `404`.")
_BATCH_ID = path_id("batch_id", BATCH_ID.pattern, "The batch's id; another key's batch is `404`.")
_FILE_404 = "`file_not_found`: unknown, expired or foreign file id."
_TEXTS = {404: _FILE_404}
_BATCH_404 = (404, "`batch_not_found`: unknown, expired or foreign batch id.")
_FILE = response_object("The file object.", "File")
_BAD_UPLOAD = (
    "`invalid_request`, `missing_field`: not multipart, no `file` or `purpose`, a `purpose` "
    "other than batch, an unknown field, a bad `expires_after`, more lines than "
    "CHATQ_FILES_MAX_LINES; `files_bytes_quota_exceeded`, `files_count_quota_exceeded`: the "
    "key's files would pass CHATQ_FILES_MAX_BYTES_PER_KEY or CHATQ_FILES_MAX_COUNT_PER_KEY."
)
_BAD_BATCH = (
    "`invalid_json`, `invalid_request`, `missing_field`: a field missing, of the wrong type "
    "or not supported (an endpoint other than /v1/chat/completions or /v1/responses, a "
    "window other than 24h)."
)
_BATCH_LIMITED = (
    "`rate_limit_exceeded`: the key's request rate is over its limit; "
    "`active_batch_limit_exceeded`: the key has CHATQ_BATCH_MAX_ACTIVE_PER_KEY batches not "
    "yet ended."
)
_UPLOAD = {"required": True, "content": {"multipart/form-data": {"schema": ref("FileUpload")}}}
_BYTES = {"application/octet-stream": {"type": "string", "format": "binary"}}


_FILES, _ONE_FILE = "/v1/files", "/v1/files/{file_id}"
_BATCHES, _ONE_BATCH = "/v1/batches", "/v1/batches/{batch_id}"
OPERATIONS = [
    Op(
        "post",
        _FILES,
        "createFile",
        "Upload a JSONL file of batch requests (multipart)",
        {200: _FILE},
        ((400, _BAD_UPLOAD), (413, "`request_too_large`: the file is over CHATQ_FILES_MAX_BYTES.")),
        body=_UPLOAD,
        description="Streamed to the file storage (CHATQ_FILES_DIR), never held in memory.",
    ),
    Op(
        "get",
        _FILES,
        "listFiles",
        "The key's files",
        {200: response_object("A page of files.", "FileList")},
        ((400, "`invalid_request`: a bad `limit` or `order`."),),
        (FILES_AFTER, FILES_LIMIT, FILES_ORDER, FILES_PURPOSE),
    ),
    Op("get", _ONE_FILE, "retrieveFile", "A file object", {200: _FILE}, (404,), (_FILE_ID,)),
    Op(
        "delete",
        _ONE_FILE,
        "deleteFile",
        "Delete a file",
        {200: response_object("Deleted.", "FileDeleted")},
        (404, (409, "`file_in_use`: an unfinished batch reads it.")),
        (_FILE_ID,),
    ),
    Op(
        "get",
        _ONE_FILE + "/content",
        "downloadFile",
        "A file's bytes",
        {200: response_object("The file, streamed.", _BYTES)},
        (404,),
        (_FILE_ID,),
    ),
    Op(
        "post",
        _BATCHES,
        "createBatch",
        "Create a batch on an uploaded file",
        {200: response_object("The batch, `validating`.", "Batch")},
        ((400, _BAD_BATCH), (404, _FILE_404 + " (`input_file_id`)"), 413, (429, _BATCH_LIMITED)),
        body="BatchCreateRequest",
    ),
    Op(
        "get",
        _BATCHES,
        "listBatches",
        "The key's batches, newest first",
        {200: response_object("A page of batches.", "BatchList")},
        ((400, "`invalid_request`: a bad `limit`."),),
        (BATCHES_AFTER, BATCHES_LIMIT),
    ),
    Op(
        "get",
        _ONE_BATCH,
        "retrieveBatch",
        "A batch, long-polled",
        {
            200: response_object(
                "The batch (as it is when `wait` runs out, or once ended).",
                "Batch",
                PREFERENCE_APPLIED,
            )
        },
        ((400, BAD_WAIT), _BATCH_404),
        (_BATCH_ID, WAIT, PREFER),
        description="With `wait`, held until the batch has ended (completed, failed, "
        "cancelled or expired) or the wait runs out.",
    ),
    Op(
        "post",
        _ONE_BATCH + "/cancel",
        "cancelBatch",
        "Cancel a batch",
        {
            200: response_object(
                "The batch: `cancelling` until its running lines end and its files are "
                "written; an ended batch is left as it is.",
                "Batch",
            )
        },
        (_BATCH_404,),
        (_BATCH_ID,),
    ),
]


def paths() -> dict[str, Schema]:
    """Every Files and Batches path."""
    return parts.paths(OPERATIONS, _TEXTS)
