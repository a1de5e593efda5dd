"""API keys: kept hashed in memory, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

from flask import request

from chatq.errors import ApiError


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class KeyRing:
    """The configured `(name, key)` pairs, holding only each key's SHA-256."""

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        self._entries = [(_digest(key), name) for name, key in pairs]

    def owner_of(self, key: str) -> str | None:
        """The name the key belongs to, or None; the time taken does not depend on the key."""
        digest = _digest(key)
        found: str | None = None
        for known, name in self._entries:
            if hmac.compare_digest(known, digest):
                found = name
        return found


def bearer_token() -> str:
    """The key of `Authorization: Bearer <key>`, or '' when absent."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def authenticate(ring: KeyRing) -> str:
    """The key name of the current request; raises 401 when the key is missing or unknown."""
    token = bearer_token()
    owner = ring.owner_of(token) if token else None
    if owner is None:
        raise ApiError(
            401,
            "invalid_api_key",
            "Missing or unknown API key; send `Authorization: Bearer <key>`.",
        )
    return owner
