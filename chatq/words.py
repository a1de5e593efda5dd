"""The words of a job that more than its own capability reads: its statuses, which the job
record holds, the Lua scripts compare (their prelude, chatq/scripting/loader.py) and the
webhooks' events name; and its priorities, the lanes a worker's settings choose among."""

from __future__ import annotations

from typing import Final, Literal, get_args

TerminalStatus = Literal["completed", "failed", "cancelled"]
JobStatus = Literal["queued", "in_progress", TerminalStatus]
Priority = Literal["interactive", "batch"]
QUEUED: Final = "queued"
IN_PROGRESS: Final = "in_progress"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
CANCELLED: Final = "cancelled"
STATUSES: tuple[str, ...] = get_args(JobStatus)
TERMINAL = frozenset(get_args(TerminalStatus))
PRIORITIES: tuple[str, ...] = get_args(Priority)
