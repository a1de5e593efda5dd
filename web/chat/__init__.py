"""The OpenAI-compatible chat front door: completions, chunks, stored answers."""

from web.chat.stored import COMPLETION_ID_PATTERN, register

__all__ = ["COMPLETION_ID_PATTERN", "register"]
