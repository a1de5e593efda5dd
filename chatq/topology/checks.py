"""Whether Redis keeps what chatq gives it: `maxmemory-policy noeviction` and persistence."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis

from chatq.topology.connections import BACKEND_ERRORS

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"


class UnsafeRedis(RuntimeError):
    """Redis may lose jobs and CHATQ_REDIS_REQUIRE_SAFE forbids running on it."""


@dataclass(frozen=True)
class Safety:
    """What Redis said about eviction and persistence; None where it would not say."""

    policy: str | None
    persistent: bool | None

    @property
    def noeviction(self) -> bool | None:
        """True when Redis refuses writes rather than deleting keys once full."""
        return None if self.policy is None else self.policy == SAFE_POLICY

    @property
    def safe(self) -> bool:
        """Known to keep every key through a full memory and a restart."""
        return self.noeviction is True and self.persistent is True

    def problems(self) -> list[str]:
        """One clause per way Redis may lose jobs, each saying how to fix it."""
        found = []
        if self.noeviction is False:
            found.append(
                f"maxmemory-policy is {self.policy}, so a full Redis deletes job records and "
                "Celery's queue bindings (set maxmemory-policy noeviction)"
            )
        elif self.noeviction is None:
            found.append("its maxmemory-policy could not be read (it must be noeviction)")
        if self.persistent is False:
            found.append(
                "neither AOF nor RDB persistence is on, so a Redis restart loses every queued "
                "and running job (set appendonly yes, or RDB save points)"
            )
        elif self.persistent is None:
            found.append("its persistence could not be read (AOF or RDB must be on)")
        return found


def _config(client: redis.Redis, name: str) -> str | None:
    try:
        value = client.config_get(name).get(name)
    except redis.ResponseError:  # managed Redis often renames or forbids CONFIG
        return None
    return None if value is None else str(value)


def _info(client: redis.Redis, section: str, field: str) -> object:
    try:
        return client.info(section).get(field)
    except redis.ResponseError:
        return None


def _persistent(client: redis.Redis) -> bool | None:
    aof, save = _config(client, "appendonly"), _config(client, "save")
    if aof is not None and save is not None:
        return aof == "yes" or bool(save.strip())
    # Without CONFIG, INFO still tells whether AOF is on, but not whether RDB saves.
    return True if _info(client, "persistence", "aof_enabled") == 1 else None


def inspect(client: redis.Redis) -> Safety:
    """Read the settings; raises one of BACKEND_ERRORS when Redis cannot be reached."""
    policy = _config(client, "maxmemory-policy")
    if policy is None:
        found = _info(client, "memory", "maxmemory_policy")
        policy = None if found is None else str(found)
    return Safety(policy=policy, persistent=_persistent(client))


def _unreachable(exc: Exception) -> None:
    hint = ""
    if "CERTIFICATE_VERIFY_FAILED" in str(exc) or "certificate verify failed" in str(exc):
        hint = "; its TLS certificate is not trusted: set CHATQ_REDIS_CA_FILE to its CA"
    log.warning(
        "could not check Redis's maxmemory-policy and persistence: %s: %s%s",
        type(exc).__name__,
        str(exc).rstrip("."),
        hint,
    )


def check_at_start(client: redis.Redis, require_safe: bool) -> Safety | None:
    """Log one loud line when Redis may lose jobs; UnsafeRedis when `require_safe` forbids it.

    None when Redis cannot be reached now: that is not fatal, requests get 503 until it is.
    """
    try:
        safety = inspect(client)
    except BACKEND_ERRORS as exc:
        _unreachable(exc)
        return None
    if safety.safe:
        return safety
    problems = "; ".join(safety.problems())
    if require_safe:
        log.error(
            "refusing to start (CHATQ_REDIS_REQUIRE_SAFE=1): Redis may lose jobs: %s", problems
        )
        raise UnsafeRedis(problems)
    log.warning("REDIS MAY LOSE JOBS: %s", problems)
    return safety
