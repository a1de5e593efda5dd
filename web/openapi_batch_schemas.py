"""The Files and Batches schemas of the OpenAPI document, merged by document().

The shapes are OpenAI's (Batch, OpenAIFile) for the subset chatq serves; tests check what is
served against OpenAI's own published schemas too.
"""

from __future__ import annotations

from chatq.batch_lines import ENDPOINTS
from chatq.batches import TIMESTAMPS
from web.openapi_schemas import Schema, _nullable, _object, ref

BATCH_STATUSES = [
    "validating",
    "failed",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "cancelling",
    "cancelled",
]
_COUNT = {"type": "integer", "minimum": 0}


def _expires_after() -> Schema:
    return _object(
        ["anchor", "seconds"],
        anchor={"type": "string", "const": "created_at"},
        seconds={"type": "integer", "minimum": 3600, "maximum": 2592000},
    )


def _file_schemas() -> dict[str, Schema]:
    file = _object(
        ["id", "object", "bytes", "created_at", "expires_at", "filename", "purpose", "status"],
        id={"type": "string"},
        object={"type": "string", "const": "file"},
        bytes=_COUNT,
        created_at={"type": "integer"},
        expires_at=_nullable("integer", "When the file is deleted (Unix seconds)."),
        filename={"type": "string"},
        purpose={"type": "string", "enum": ["batch", "batch_output"]},
        status={"type": "string", "const": "processed"},
    )
    upload = _object(
        ["file", "purpose"],
        file={"type": "string", "format": "binary"},
        purpose={"type": "string", "const": "batch"},
    )
    upload["properties"] |= {
        "expires_after[anchor]": {"type": "string", "const": "created_at"},
        "expires_after[seconds]": {
            "type": "integer",
            "minimum": 3600,
            "maximum": 2592000,
            "description": "Default: CHATQ_FILES_TTL.",
        },
    }
    return {
        "File": file,
        "FileUpload": upload,
        "FileList": _list_of("File"),
        "FileDeleted": _object(
            ["id", "object", "deleted"],
            id={"type": "string"},
            object={"type": "string", "const": "file"},
            deleted={"type": "boolean"},
        ),
    }


def _list_of(name: str) -> Schema:
    return _object(
        ["object", "data", "first_id", "last_id", "has_more"],
        object={"type": "string", "const": "list"},
        data={"type": "array", "items": ref(name)},
        first_id=_nullable("string", "The first id of the page."),
        last_id=_nullable("string", "The last id: `after` for the next page."),
        has_more={"type": "boolean"},
    )


def _usage_schema() -> Schema:
    return _object(
        [
            "input_tokens",
            "input_tokens_details",
            "output_tokens",
            "output_tokens_details",
            "total_tokens",
        ],
        input_tokens=_COUNT,
        input_tokens_details=_object(["cached_tokens"], cached_tokens=_COUNT),
        output_tokens=_COUNT,
        output_tokens_details=_object(["reasoning_tokens"], reasoning_tokens=_COUNT),
        total_tokens=_COUNT,
    )


def _batch_schema() -> Schema:
    stamp: Schema = {"type": ["integer", "null"]}
    error = _object(
        ["code", "message", "param", "line"],
        code={"type": "string"},
        message={"type": "string"},
        param={"type": ["string", "null"]},
        line={"type": ["integer", "null"]},
    )
    errors = _object(
        ["object", "data"],
        object={"type": "string", "const": "list"},
        data={"type": "array", "items": error},
    )
    stamps = TIMESTAMPS
    batch = _object(
        [
            "id",
            "object",
            "endpoint",
            "errors",
            "input_file_id",
            "completion_window",
            "status",
            "output_file_id",
            "error_file_id",
            *stamps,
            "request_counts",
            "usage",
            "metadata",
        ],
        id={"type": "string"},
        object={"type": "string", "const": "batch"},
        endpoint={"type": "string"},
        errors={"anyOf": [{"type": "null"}, errors]},
        input_file_id={"type": "string"},
        completion_window={"type": "string"},
        status={"type": "string", "enum": BATCH_STATUSES},
        output_file_id={"type": ["string", "null"]},
        error_file_id={"type": ["string", "null"]},
        request_counts=_object(
            ["total", "completed", "failed"], total=_COUNT, completed=_COUNT, failed=_COUNT
        ),
        usage=_usage_schema(),
        metadata={"type": ["object", "null"], "additionalProperties": {"type": "string"}},
        model={"type": "string", "description": "The model of the first valid line."},
    )
    batch["properties"] |= {name: stamp for name in stamps}
    return batch


def schemas() -> dict[str, Schema]:
    """Every Files and Batches schema, by name."""
    create = _object(
        ["input_file_id", "endpoint", "completion_window"],
        input_file_id={"type": "string"},
        endpoint={
            "type": "string",
            "enum": list(ENDPOINTS),
            "description": "The `url` of every line; a line's `body` is a request to "
            "it (/v1/responses: the Responses API's text subset).",
        },
        completion_window={
            "type": "string",
            "const": "24h",
            "description": "Lasts CHATQ_BATCH_WINDOW seconds (24 h).",
        },
        metadata={
            "type": ["object", "null"],
            "maxProperties": 16,
            "additionalProperties": {"type": "string", "maxLength": 512},
        },
        output_expires_after=_expires_after(),
    )
    return {
        **_file_schemas(),
        "Batch": _batch_schema(),
        "BatchList": _list_of("Batch"),
        "BatchCreateRequest": create,
    }
