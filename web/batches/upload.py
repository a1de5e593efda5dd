"""Receiving an upload: a multipart body streamed to the file storage, never held in memory.

werkzeug's form parser would spool the file to a temporary file first and then it would be
copied; here the body is decoded as it arrives (werkzeug's sans-I/O multipart decoder) and
the file part goes straight into the storage, counted (bytes, lines) on the way. The request
may be larger than CHATQ_MAX_BODY_BYTES: its own limit is CHATQ_FILES_MAX_BYTES.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from flask import request
from msgspec import structs
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

from chatq.batches import CHUNK_BYTES, FileStorage, FileUpload, Hold, Upload
from chatq.errors import ApiError

# The form around the file: part headers, boundaries and the small fields.
FORM_OVERHEAD_BYTES = 64 * 1024
MAX_FIELD_BYTES = 1024
MAX_PARTS = 8
# The form's fields besides the file: FileUpload's.
FIELDS = tuple(f.encode_name for f in structs.fields(FileUpload) if f.encode_name != "file")
MAX_FILENAME_CHARS = 255


@dataclass
class Received:
    """What a multipart upload carried: its small fields, and the file (not yet committed)."""

    fields: dict[str, str] = field(default_factory=dict)
    upload: Upload | None = None
    filename: str = ""
    size_bytes: int = 0
    newlines: int = 0
    ends_with_newline: bool = True
    _field: str = ""
    _in_file: bool = False

    @property
    def lines(self) -> int:
        """Lines of the file, a last one without a newline included."""
        return self.newlines + (0 if self.ends_with_newline else 1)


def _invalid(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, "invalid_request", message, param=param)


def _boundary() -> bytes:
    boundary = request.mimetype_params.get("boundary", "")
    if request.mimetype != "multipart/form-data" or not boundary:
        raise _invalid("Send the file as multipart/form-data with `file` and `purpose`.")
    return boundary.encode("latin-1", "replace")


class Receiver:
    """Decodes one upload into a Received, its file streamed into `storage` as `file_id`."""

    def __init__(self, storage: FileStorage, file_id: str, max_bytes: int, hold: Hold) -> None:
        self.storage = storage
        self.file_id = file_id
        self.max_bytes = max_bytes
        self.hold = hold  # the key's quota, held ahead of the file's bytes
        self.got = Received()

    def receive(self) -> Received:
        """Read the whole body; the file's Upload is the caller's to commit or discard."""
        request.max_content_length = self.max_bytes + FORM_OVERHEAD_BYTES
        decoder = MultipartDecoder(
            _boundary(), max_form_memory_size=CHUNK_BYTES * 4, max_parts=MAX_PARTS
        )
        try:
            stream = request.stream
            while chunk := stream.read(CHUNK_BYTES):
                decoder.receive_data(chunk)
                self._drain(decoder)
                # A fast sender's next bytes are always ready, so reading them never switches
                # to another greenlet: let the process's other requests run between chunks.
                time.sleep(0)
            decoder.receive_data(None)
            self._drain(decoder)
        except RequestEntityTooLarge as exc:
            self._discard()
            raise ApiError(
                413, "request_too_large", f"The file is larger than {self.max_bytes} bytes."
            ) from exc
        except ValueError as exc:
            self._discard()
            raise _invalid("The body is not valid multipart/form-data.") from exc
        except BaseException:
            self._discard()
            raise
        return self.got

    def _discard(self) -> None:
        if self.got.upload is not None:
            self.got.upload.discard()

    def _drain(self, decoder: MultipartDecoder) -> None:
        while True:
            event = decoder.next_event()
            if isinstance(event, NeedData | Epilogue):
                return
            if isinstance(event, File):
                self._file(event)
            elif isinstance(event, Field):
                self._start_field(event.name)
            elif isinstance(event, Data):
                self._data(event.data)

    def _file(self, event: File) -> None:
        if event.name != "file":
            raise _invalid(f"Unknown form field `{event.name[:40]}`.", event.name[:40])
        if self.got.upload is not None:
            raise _invalid("Send one `file`.", "file")
        self._hold_start()
        self.got.upload = self.storage.create(self.file_id)
        self.got.filename = event.filename[:MAX_FILENAME_CHARS]
        self.got._in_file = True

    def _hold_start(self) -> None:
        """Room for the file before its first byte: as much as the declared body may carry
        (all of it but the form around the file is sure to be the file's)."""
        declared = request.content_length
        least = max(0, declared - FORM_OVERHEAD_BYTES) if declared is not None else 0
        self.hold.start(least, declared)

    def _start_field(self, name: str) -> None:
        if name == "file":
            raise _invalid("`file` must be a file part (with curl: -F file=@path).", "file")
        if name not in FIELDS:
            raise _invalid(f"Unknown form field `{name[:40]}`.", name[:40])
        if name in self.got.fields:
            raise _invalid(f"`{name}` is given twice.", name)
        self.got.fields[name] = ""
        self.got._field, self.got._in_file = name, False

    def _data(self, data: bytes) -> None:
        got = self.got
        if not got._in_file:
            value = got.fields[got._field] + data.decode("utf-8", "replace")
            if len(value) > MAX_FIELD_BYTES:
                raise _invalid(f"`{got._field}` is too long.", got._field)
            got.fields[got._field] = value
            return
        if not data:
            return
        got.size_bytes += len(data)
        if got.size_bytes > self.max_bytes:
            raise RequestEntityTooLarge()
        self.hold.cover(got.size_bytes)
        assert got.upload is not None
        got.upload.write(data)
        got.newlines += data.count(b"\n")
        got.ends_with_newline = data.endswith(b"\n")
