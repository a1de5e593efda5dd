"""The OpenAPI 3.1 document of the API."""

from __future__ import annotations

from typing import Any


def document() -> dict[str, Any]:
    """The document served at /openapi.json."""
    return {"openapi": "3.1.0", "info": {"title": "chatq", "version": "0.1.0"}, "paths": {}}
