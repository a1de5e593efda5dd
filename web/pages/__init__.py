"""The server's own pages: probes, /metrics, /v1/queue, /openapi.json, the demo page."""
