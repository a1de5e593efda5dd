"""The result cache: its key, the per-request policy, and the in-process LRU level."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

# Request fields that do not change the answer, left out of the key.
NOT_IN_KEY = frozenset({"stream", "stream_options", "user", "metadata", "store"})
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?\s*(?:,|$)", re.IGNORECASE)
# More digits than this are more seconds than any TTL: no need to read them.
_MAX_AGE_DIGITS = 12


def digest(value: Any) -> str:
    """SHA-256 of the canonical JSON of `value` (sorted keys, no spaces, UTF-8)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def cache_key(request: dict[str, Any], scope: str) -> str:
    """The digest of everything that affects the answer, within `scope`."""
    kept = {k: v for k, v in request.items() if k not in NOT_IN_KEY}
    return digest({"scope": scope, "request": kept})


@dataclass(frozen=True)
class CachePolicy:
    """What the cache may do for one request."""

    lookup: bool
    store_ttl_s: int

    @property
    def cacheable(self) -> bool:
        """Whether the request takes part in caching or coalescing at all."""
        return self.lookup or self.store_ttl_s > 0


def _max_age_s(cache_control: str, ttl_cap_s: int) -> int:
    """`max-age=N` of Cache-Control capped at `ttl_cap_s`; 0 when absent or 0."""
    match = _MAX_AGE.search(cache_control)
    if not match:
        return 0
    digits = match.group(1)
    return ttl_cap_s if len(digits) > _MAX_AGE_DIGITS else min(int(digits), ttl_cap_s)


def policy(request: dict[str, Any], cache_control: str, default_ttl_s: int) -> CachePolicy:
    """Cacheable when deterministic (temperature 0) or asked with max-age; per Cache-Control.

    `default_ttl_s` (CHATQ_CACHE_TTL) is also the longest a max-age may keep a result;
    0 turns caching and single-flight off for every request.
    """
    if default_ttl_s <= 0:
        return CachePolicy(False, 0)
    directives = {d.strip().lower().split("=")[0] for d in cache_control.split(",")}
    max_age_s = _max_age_s(cache_control, default_ttl_s)
    deterministic = request.get("temperature") == 0
    if not deterministic and not max_age_s:
        return CachePolicy(False, 0)
    ttl_s = max_age_s or default_ttl_s
    return CachePolicy(
        lookup="no-cache" not in directives,
        store_ttl_s=0 if "no-store" in directives else ttl_s,
    )


class LocalCache:
    """A bounded LRU of results with a time to live, in front of Redis's copy."""

    def __init__(self, max_entries: int, ttl_s: float) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._entries: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        """The value if present and fresh."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires_at, value = entry
            if expires_at < time.monotonic():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: str, value: str, ttl_s: float) -> None:
        """Keep `value` for at most `ttl_s` (and our own TTL); evict the oldest when full."""
        if self.max_entries <= 0:
            return
        with self._lock:
            self._entries[key] = (time.monotonic() + min(ttl_s, self.ttl_s), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
