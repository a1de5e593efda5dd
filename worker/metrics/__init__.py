"""A worker process's Prometheus series and its own /metrics server."""
