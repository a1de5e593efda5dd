"""The server's own pages: probes, /metrics, /v1/queue, /v1/usage, /openapi.json, the demo."""

from web.pages.ops import register

__all__ = ["register"]
