"""Where the bytes of files live: a small interface, and a directory that implements it.

Metadata (owner, size, expiry) lives in Redis (chatq/batches/file_records.py); the bytes never do. A
directory serves one host, or many through a shared volume; object storage would be one more
implementation of `FileStorage`. A file is written whole before anyone can read it: it grows
under a temporary name and takes its own only when committed, so a reader never sees half a
file and a writer that dies leaves nothing behind but a temporary file the janitor removes.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
from pathlib import Path
from typing import BinaryIO, Protocol

from chatq import runtime

FILE_ID = re.compile(r"^file-[A-Za-z0-9_-]{16,64}$")
CHUNK_BYTES = 64 * 1024
PARTIAL_DIR = ".partial"
# Files hold tenants' requests and answers: only chatq's own user may read them.
DIR_MODE, FILE_MODE = 0o700, 0o600


def new_file_id() -> str:
    """A fresh file id: `file-` and 32 url-safe characters of 192 random bits."""
    return "file-" + secrets.token_urlsafe(24)


def is_file_id(value: str) -> bool:
    """Whether `value` has the shape of a file id at all."""
    return bool(FILE_ID.fullmatch(value))


class Upload(Protocol):
    """A file being written: invisible until `commit`, gone after `discard`."""

    def write(self, data: bytes) -> None:
        """Append `data`."""

    def commit(self) -> int:
        """Make the file readable under its id; answers its size in bytes."""

    def discard(self) -> None:
        """Drop what was written (nothing happens after a commit)."""


class FileStorage(Protocol):
    """The bytes of files, by file id."""

    def create(self, file_id: str) -> Upload:
        """Start writing the file `file_id` (replacing it on commit if it exists)."""

    def open(self, file_id: str) -> BinaryIO:
        """The file for reading; FileNotFoundError when there is none."""

    def delete(self, file_id: str) -> None:
        """Remove the file; nothing happens when there is none."""


class _DirectoryUpload:
    def __init__(self, partial: Path, final: Path) -> None:
        self._partial = partial
        self._final = final
        self._file: BinaryIO | None = _create_private(partial)
        self.size_bytes = 0

    def write(self, data: bytes) -> None:
        assert self._file is not None, "written after commit or discard"
        self._file.write(data)
        self.size_bytes += len(data)

    def commit(self) -> int:
        assert self._file is not None, "committed twice"
        self._file.flush()
        # Durable before Redis says the file exists; seconds for a large file, off the loop.
        runtime.blocking(os.fsync, self._file.fileno())
        self._file.close()
        self._file = None
        os.replace(self._partial, self._final)
        return self.size_bytes

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            with contextlib.suppress(FileNotFoundError):
                self._partial.unlink()


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


class DirectoryStorage:
    """Files as `<root>/<file id>`; uploads grow in `<root>/.partial/` until committed."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    def _path(self, file_id: str) -> Path:
        if not is_file_id(file_id):  # never a path of our choosing: no `..`, no `/`
            raise ValueError(f"not a file id: {file_id[:80]!r}")
        return self.root / file_id

    def create(self, file_id: str) -> Upload:
        """See FileStorage."""
        final = self._path(file_id)
        partial_dir = self.root / PARTIAL_DIR
        partial_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        return _DirectoryUpload(partial_dir / f"{file_id}.{secrets.token_hex(6)}", final)

    def open(self, file_id: str) -> BinaryIO:
        """See FileStorage."""
        return open(self._path(file_id), "rb")

    def delete(self, file_id: str) -> None:
        """See FileStorage."""
        # Freeing a large file's blocks takes the kernel tens of milliseconds: off the loop.
        runtime.blocking(_unlink, self._path(file_id))

    def remove_stale_partials(self, older_than_s: float) -> int:
        """Delete uploads left half-written (their writer died) longer ago than that."""
        removed = 0
        cutoff = time.time() - older_than_s
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.root / PARTIAL_DIR):
                with contextlib.suppress(FileNotFoundError):
                    if entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
        return removed


def _create_private(path: Path) -> BinaryIO:
    """A new file for writing that only this user may read (whatever the umask says)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    return os.fdopen(fd, "wb")


class FilesDirRefused(RuntimeError):
    """CHATQ_FILES_DIR cannot be kept private: another user owns it, or it cannot be made."""


def prepare_dir(files_dir: str) -> None:
    """Make the folder (0700) if it is missing; refuse one that another user owns, since that
    user could read or replace every file; take away others' access to one of our own."""
    path = Path(files_dir)
    try:
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise FilesDirRefused(
            f"CHATQ_FILES_DIR={files_dir}: cannot make or read it: {exc.strerror or exc}"
        ) from None
    if info.st_uid != os.geteuid():
        raise FilesDirRefused(
            f"CHATQ_FILES_DIR={files_dir} is owned by uid {info.st_uid}, not by this process's "
            f"user (uid {os.geteuid()}): another user could read or replace the files there"
        )
    if stat.S_IMODE(info.st_mode) != DIR_MODE:
        path.chmod(DIR_MODE)


def storage_for(files_dir: str) -> DirectoryStorage:
    """The storage named by CHATQ_FILES_DIR, its folder made private (see prepare_dir)."""
    prepare_dir(files_dir)
    return DirectoryStorage(files_dir)
