"""The web's spans: each /v1 request, a long-poll's wake."""

from web.tracing.spans import install, job_fields, long_poll

__all__ = ["install", "job_fields", "long_poll"]
