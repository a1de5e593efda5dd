"""The Files and Batches schemas of the OpenAPI document, from chatq/batch_objects.py; tests
check what is served against OpenAI's own published schemas too."""

from __future__ import annotations

from chatq.batch_objects import BatchCreateRequest, BatchList, FileDeleted, FileList, FileUpload
from web.openapi_schemas import Schema, components


def schemas() -> dict[str, Schema]:
    """Every Files and Batches schema, by name."""
    return components(FileUpload, FileList, FileDeleted, BatchList, BatchCreateRequest)
