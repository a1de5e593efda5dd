"""Lines the load generator prints for the harness to read: progress, then the result."""

from __future__ import annotations

import json
import sys
from typing import Any


def say(line: str) -> None:
    """One progress line on stdout, flushed at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def result(data: dict[str, Any]) -> None:
    """The final result: one `RESULT <json>` line."""
    say("RESULT " + json.dumps(data, separators=(",", ":")))
