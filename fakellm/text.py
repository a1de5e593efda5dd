"""Deterministic reply text: an echo of the prompt, or N words seeded by the request."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

Message = dict[str, Any]

_WORDS = (
    "alpha", "amber", "anchor", "apple", "arrow", "autumn", "basket", "beacon",
    "birch", "bridge", "candle", "canyon", "cedar", "cloud", "comet", "copper",
    "coral", "delta", "desert", "ember", "falcon", "feather", "forest", "garden",
    "glacier", "granite", "harbor", "hazel", "island", "ivory", "jasmine", "lantern",
    "maple", "meadow", "meteor", "mirror", "nectar", "ocean", "orchid", "pebble",
    "pepper", "prairie", "quartz", "raven", "river", "saffron", "shadow", "silver",
    "spruce", "summit", "thunder", "timber", "tulip", "velvet", "willow", "zephyr",
)  # fmt: skip


def message_text(message: Message) -> str:
    """Return a message's text; the text parts of a list content are joined by spaces."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            for part in content
            if part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    return ""


def prompt_word_count(messages: list[Message]) -> int:
    """Count the words in all messages: fakellm's `prompt_tokens`."""
    return sum(len(message_text(message).split()) for message in messages)


def echo_words(messages: list[Message]) -> list[str]:
    """Return the words of the last user message."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message).split()
    return []


def generated_words(messages: list[Message], count: int) -> list[str]:
    """Return `count` words picked by a generator seeded from the messages."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"))
    seed = int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:8], "big")
    return random.Random(seed).choices(_WORDS, k=count)


def reply_words(messages: list[Message], tokens: int | None) -> list[str]:
    """Return the reply, one word per token."""
    if tokens is None:
        return echo_words(messages)
    return generated_words(messages, tokens)


def deltas(words: list[str]) -> list[str]:
    """Return the streamed content deltas: "w1", " w2", " w3", ..."""
    return [word if index == 0 else " " + word for index, word in enumerate(words)]
