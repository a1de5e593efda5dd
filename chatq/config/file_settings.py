"""The settings of uploaded files and of batches: where files are kept, how large and how
many a key may have, and how many batch lines run at once."""

from __future__ import annotations

from dataclasses import dataclass

from chatq.config.env import default_files_dir, number, text, whole
from chatq.config.fields import computed_setting, setting


@dataclass(frozen=True, repr=False)
class FilesSettings:
    """Files and batches."""

    files_dir: str = computed_setting(
        "CHATQ_FILES_DIR",
        default_files_dir,
        text,
        unit="path",
        note=(
            "in the user's data folder: `$XDG_DATA_HOME/chatq/files`, else "
            "`~/.local/share/chatq/files`"
        ),
        doc=(
            "where uploaded files and batches' output files are kept; the web writes, the workers"
            " read and write: one folder on one host, a shared volume across hosts. Made `0700` "
            "at start (its files are `0600`); a web or a worker of the `batch` lane refuses to "
            'start when another user owns it (see "Batch", Files)'
        ),
    )

    files_max_bytes: int = setting(
        "CHATQ_FILES_MAX_BYTES",
        200 * 1024 * 1024,
        whole,
        unit="bytes",
        minimum=1,
        doc=(
            "largest file `POST /v1/files` takes (200 MiB), whatever `CHATQ_MAX_BODY_BYTES` says;"
            " larger is `413`"
        ),
    )

    files_max_lines: int = setting(
        "CHATQ_FILES_MAX_LINES",
        50000,
        whole,
        unit="lines",
        minimum=1,
        doc="most lines an uploaded file (a batch's requests) may have; more is `400`",
    )

    files_ttl_s: int = setting(
        "CHATQ_FILES_TTL",
        30 * 86400,
        whole,
        unit="s",
        minimum=1,
        doc=(
            "a file uploaded without `expires_after`, a batch's output and error files, and an "
            "ended batch are deleted this long after they are made (30 days)"
        ),
    )

    files_max_bytes_per_key: int = setting(
        "CHATQ_FILES_MAX_BYTES_PER_KEY",
        10 * 1024**3,
        whole,
        unit="bytes",
        minimum=1,
        doc=(
            "most bytes a key's files may take together (10 GiB): its uploads and its batches' "
            "output and error files, until deleted or expired; an upload past it is `400 "
            "files_bytes_quota_exceeded`"
        ),
    )

    files_max_count_per_key: int = setting(
        "CHATQ_FILES_MAX_COUNT_PER_KEY",
        1000,
        whole,
        unit="files",
        minimum=1,
        doc=(
            "most files a key may keep at once (uploads and batch output and error files, uploads"
            " in progress included); one more upload is `400 files_count_quota_exceeded`"
        ),
    )

    batch_max_queued: int = setting(
        "CHATQ_BATCH_MAX_QUEUED",
        80,
        whole,
        unit="lines",
        minimum=1,
        doc=(
            "most batch lines fed and not yet done at once, waiting in the `batch` lane or "
            "running (all batches together, shared fairly among key names); the others wait in "
            "their file. Below the workers' slots, it leaves slots free for interactive jobs (see"
            ' "Batch")'
        ),
    )

    batch_max_active_per_key: int = setting(
        "CHATQ_BATCH_MAX_ACTIVE_PER_KEY",
        100,
        whole,
        unit="batches",
        minimum=1,
        doc=(
            "most batches of one key not yet ended (`validating`, `in_progress`, `finalizing`, "
            '`cancelling`); one more is `429 active_batch_limit_exceeded` (see "Batch")'
        ),
    )

    batch_window_s: float = setting(
        "CHATQ_BATCH_WINDOW",
        86400.0,
        number,
        unit="s",
        minimum=0.1,
        doc=(
            "how long a batch's `completion_window` of `24h` lasts; past it the batch expires "
            "with what it has done. Shorten it only to try expiry out"
        ),
    )
