"""OpenAI's Responses API endpoints, and their Server-Sent Events."""

from web.responses.routes import bp

__all__ = ["bp"]
