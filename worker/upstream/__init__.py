"""Calling the upstream chat API: connections, endpoints, attempts, SSE, pacing."""
