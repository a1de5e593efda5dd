"""OpenAI's Batches and Files endpoints, uploads streamed to storage."""

from web.batches.routes import register

__all__ = ["register"]
