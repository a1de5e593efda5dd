"""OpenAI's Files API for batches: upload, list, read, download and delete a key's files."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import Blueprint, Flask, Response, current_app, g
from flask import request as current_request
from msgspec import UNSET, structs
from werkzeug.wsgi import wrap_file

from chatq import batches as files_meta
from chatq import metrics
from chatq.batches import (
    CHUNK_BYTES,
    BatchStore,
    DirectoryStorage,
    FileDeleted,
    FileIndex,
    FileList,
    FileQuota,
    FilesDirRefused,
    FileUpload,
    Hold,
    is_file_id,
    new_file_id,
    page_view,
    storage_for,
)
from chatq.chat import Refused, convert
from chatq.errors import ApiError
from web import http
from web.batches.upload import Received, Receiver
from web.context import Services, authorize, services
from web.http import FILES_AFTER, FILES_LIMIT, FILES_ORDER, FILES_PURPOSE, json_response

log = logging.getLogger(__name__)
bp = Blueprint("files", __name__, url_prefix="/v1/files")


@dataclass
class BatchServices:
    """What the Files and Batches endpoints use besides the job services."""

    files: FileIndex
    batches: BatchStore
    storage: DirectoryStorage
    quota: FileQuota


def install(app: Flask) -> None:
    """Add the Files and Batches services to `app` (after its job services)."""
    svc: Services = app.extensions["chatq"]
    s = svc.settings
    app.extensions["chatq_batches"] = BatchServices(
        files=FileIndex(svc.redis),
        batches=BatchStore(svc.redis, s.files_ttl_s),
        storage=_storage(s.files_dir),
        quota=FileQuota(svc.redis, s.files_max_bytes_per_key, s.files_max_count_per_key),
    )


def _storage(files_dir: str) -> DirectoryStorage:
    try:
        return storage_for(files_dir)
    except FilesDirRefused as exc:
        log.error("refusing to start: %s", exc)
        # gunicorn's "worker failed to boot" status: its master stops instead of respawning.
        raise SystemExit(3) from None


def batch_services() -> BatchServices:
    """The Files and Batches services of the current app."""
    found: BatchServices = current_app.extensions["chatq_batches"]
    return found


def file_not_found(param: str = "id") -> ApiError:
    """An unknown, expired or foreign file: all look the same."""
    return ApiError(404, "file_not_found", "No file with that id.", param=param)


def _form_param(param: str) -> str:
    """`expires_after[seconds]`, the form's field, as OpenAI's `param` names it."""
    return param.replace("[", ".").replace("]", "")


def _checked(got: Received, max_lines: int, default_ttl_s: int) -> int:
    """The upload's expiry in seconds, once its fields and file are as they must be."""
    sent = {**got.fields, **({"file": got.filename} if got.upload is not None else {})}
    try:
        asked = convert(sent, FileUpload, lax=True)
    except Refused as error:
        error.param = _form_param(error.param or "")
        raise
    if got.lines > max_lines:
        raise ApiError(
            400, "invalid_request", f"The file has more than {max_lines} lines.", param="file"
        )
    return default_ttl_s if asked.seconds is UNSET else asked.seconds


def _commit(got: Received, max_lines: int, default_ttl_s: int) -> tuple[int, int]:
    """The upload's expiry in seconds and its size, once checked and committed."""
    try:
        expires_s = _checked(got, max_lines, default_ttl_s)
        assert got.upload is not None
        return expires_s, got.upload.commit()
    except BaseException:
        if got.upload is not None:
            got.upload.discard()
        raise


@bp.post("")
def upload() -> Response:
    """Upload a JSONL file of batch requests, streamed to the file storage."""
    svc, bsvc = services(), batch_services()
    owner = authorize(svc)
    s = svc.settings
    file_id = new_file_id()
    hold = Hold(bsvc.quota, owner, file_id, s.files_max_bytes)
    try:
        got = Receiver(bsvc.storage, file_id, s.files_max_bytes, hold).receive()
        expires_s, size_bytes = _commit(got, s.files_max_lines, s.files_ttl_s)
    except BaseException:
        hold.release()  # the room it held is the key's again
        raise
    now = metrics.redis_time(svc.redis)
    meta = files_meta.new_meta(
        file_id=file_id,
        owner=owner,
        size_bytes=size_bytes,
        lines=got.lines,
        filename=got.filename or "upload.jsonl",
        purpose=files_meta.PURPOSE_INPUT,
        created_at=now,
        expires_at=now + expires_s,
    )
    bsvc.files.add(meta)
    log.info(
        "file %s uploaded: %d bytes, %d lines",
        file_id,
        size_bytes,
        got.lines,
        extra={"key": owner, "event": "file_uploaded"},
    )
    return json_response(files_meta.public_file_view(meta))


@bp.get("")
def list_files() -> Response:
    """The key's files, newest first (`order=asc`: oldest), `after` a file id."""
    svc, bsvc = services(), batch_services()
    owner = authorize(svc)
    page = bsvc.files.page(
        owner,
        after=http.text(FILES_AFTER) or "",
        limit=http.whole(FILES_LIMIT),
        newest_first=http.choice(FILES_ORDER, svc.settings) == "desc",
        purpose=http.text(FILES_PURPOSE) or "",
        now=metrics.redis_time(svc.redis),
    )
    data = [files_meta.public_file_view(m) for m in page.files]
    return json_response(page_view(FileList, data, page.has_more))


def owned_file(file_id: str, owner: str, param: str = "id") -> dict[str, str]:
    """The file's metadata if it is `owner`'s and live; otherwise 404."""
    if not is_file_id(file_id):
        raise file_not_found(param)
    svc = services()
    meta = batch_services().files.get(file_id, owner, metrics.redis_time(svc.redis))
    if meta is None:
        raise file_not_found(param)
    return meta


@bp.get("/<file_id>")
def get_file(file_id: str) -> Response:
    """The file object."""
    owner = authorize(services())
    return json_response(files_meta.public_file_view(owned_file(file_id, owner)))


@bp.get("/<file_id>/content")
def file_content(file_id: str) -> Response:
    """The file's bytes, streamed from the storage."""
    owner = authorize(services())
    meta = owned_file(file_id, owner)
    g.chatq_file_id = file_id
    try:
        handle = batch_services().storage.open(file_id)
    except FileNotFoundError as exc:  # deleted between the two reads
        raise file_not_found() from exc
    body = wrap_file(current_request.environ, handle, buffer_size=CHUNK_BYTES)
    headers = {
        "Content-Length": meta.get("bytes") or "0",
        "Content-Disposition": f'attachment; filename="{file_id}.jsonl"',
    }
    return Response(
        body, headers=headers, mimetype="application/octet-stream", direct_passthrough=True
    )


@bp.delete("/<file_id>")
def delete_file(file_id: str) -> Response:
    """Delete the file, unless an unfinished batch reads it (409)."""
    owner = authorize(services())
    if not is_file_id(file_id):
        raise file_not_found()
    bsvc = batch_services()
    outcome = bsvc.files.delete(file_id, owner)
    if outcome == "missing":
        raise file_not_found()
    if outcome == "in_use":
        raise ApiError(
            409,
            "file_in_use",
            "A batch that has not ended reads this file; cancel it or wait for its end.",
            param="id",
        )
    bsvc.storage.delete(file_id)
    return json_response(structs.asdict(FileDeleted(id=file_id, object="file", deleted=True)))
