"""Per-key limits in Redis: requests and tokens per minute, token budgets per UTC day and
month (chatq/admission/limits_admit.lua, limits_settle.lua).

A request is charged when it is admitted: one request, and its prompt tokens plus the
output it may ask for. The tokens are held for its job until the job ends, then replaced by
what the job used (the outbox tells the workers; worker/admission/quotas.py). The minute limits are
buckets that refill continuously (as OpenAI's `x-ratelimit-reset-*` describe them: the time
until the bucket is full again), so a refused client is told exactly when it will pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from chatq import keys
from chatq.chat import charged_tokens
from chatq.config import KeyLimits, Settings
from chatq.scripting import LuaScript

# A key's state outlives the longest period it counts (a month), whatever its use.
KEEP_S = 40 * 86400
ADMITTED, HELD, PEEK = "ok", "held", "peek"
# Refusals: a minute's limit (the client may retry after `wait_s`), or for good.
RATE_REFUSALS = frozenset({"requests", "tokens"})
QUOTA_REFUSALS = frozenset({"day", "month"})
TOO_LARGE = "too_large"


def state_key(owner: str) -> str:
    """Hash: a key name's buckets and its day's and month's use; expires KEEP_S after its
    last charge. Its keys share the hash tag {limits:<name>} (one Cluster slot)."""
    return f"{keys.PREFIX}{{limits:{owner}}}"


def held_key(owner: str) -> str:
    """Hash: job id -> "cost prompt day month" of the key's jobs not yet settled."""
    return state_key(owner) + ":held"


class AdmitArgs(NamedTuple):
    """limits_admit.lua: charge (or peek at) one request of a key."""

    state: str  # key: state_key
    held: str  # key: held_key
    mode: str  # 'admit' or 'peek'
    job: str
    cost: int
    prompt: int
    rpm: int
    tpm: int
    per_day: int
    per_month: int
    keep_s: int


class Standing(NamedTuple):
    """limits_admit.lua's answer, field by field (times in ms, as Redis counts them)."""

    verdict: str
    wait_ms: int
    remaining_requests: int
    requests_full_in_ms: int
    remaining_tokens: int
    tokens_full_in_ms: int
    day_tokens: int
    day_requests: int
    month_tokens: int
    month_requests: int
    reserved_tokens: int
    day_start: int
    day_end: int
    month_start: int
    month_end: int


def decode_standing(answer: list[Any]) -> Standing:
    """From limits_admit.lua's flat answer: the verdict, then integers."""
    verdict, *numbers = answer
    return Standing(str(verdict), *(int(n) for n in numbers))


ADMIT = LuaScript(
    "limits_admit.lua",
    AdmitArgs,
    decode_standing,
    keys=("state", "held"),
    libraries=("limits_calendar.lua",),
)


class SettleArgs(NamedTuple):
    """limits_settle.lua: what a job held replaced by what it used."""

    state: str
    held: str
    job: str
    how: str  # 'exact', 'prompt' or 'keep'
    tokens: int
    tpm: int


SETTLE = LuaScript(
    "limits_settle.lua", SettleArgs, int, keys=("state", "held"), libraries=("limits_calendar.lua",)
)


@dataclass(frozen=True)
class Window:
    """A key's limits and use as one admission (or a peek) saw them."""

    verdict: str
    wait_s: float
    limits: KeyLimits
    remaining_requests: int
    requests_full_in_s: float
    remaining_tokens: int
    tokens_full_in_s: float
    day_tokens: int
    day_requests: int
    month_tokens: int
    month_requests: int
    reserved_tokens: int
    day_start: int
    day_end: int
    month_start: int
    month_end: int

    @classmethod
    def parse(cls, answer: Standing, limits: KeyLimits) -> Window:
        """From the answer of limits_admit.lua."""
        a = answer
        return cls(
            verdict=a.verdict,
            wait_s=a.wait_ms / 1000,
            limits=limits,
            remaining_requests=a.remaining_requests,
            requests_full_in_s=a.requests_full_in_ms / 1000,
            remaining_tokens=a.remaining_tokens,
            tokens_full_in_s=a.tokens_full_in_ms / 1000,
            day_tokens=a.day_tokens,
            day_requests=a.day_requests,
            month_tokens=a.month_tokens,
            month_requests=a.month_requests,
            reserved_tokens=a.reserved_tokens,
            day_start=a.day_start,
            day_end=a.day_end,
            month_start=a.month_start,
            month_end=a.month_end,
        )


class Limits:
    """The per-key limits of CHATQ_KEY_* over one Redis."""

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.redis = client
        self.default = settings.key_limits
        self.overrides = dict(settings.key_limit_overrides)
        self.output_budget = settings.default_output_budget
        self.enabled = self.default.any or any(o.any for o in self.overrides.values())
        self._admit = ADMIT.on(client)
        self._settle = SETTLE.on(client)

    def of(self, owner: str) -> KeyLimits:
        """The limits of key name `owner`."""
        return self.overrides.get(owner, self.default)

    def cost(self, request: dict[str, Any], prompt_tokens: int) -> int:
        """Tokens a request is charged at admission: its prompt, and the output it may ask
        for (its max_tokens, else CHATQ_DEFAULT_OUTPUT_BUDGET) times `n`."""
        return charged_tokens(request, prompt_tokens, self.output_budget)

    def _args(self, mode: str, owner: str, job_id: str, cost: int, prompt_tokens: int) -> AdmitArgs:
        lim = self.of(owner)
        return AdmitArgs(
            state=state_key(owner),
            held=held_key(owner),
            mode=mode,
            job=job_id,
            cost=cost,
            prompt=prompt_tokens,
            rpm=lim.requests_per_minute,
            tpm=lim.tokens_per_minute,
            per_day=lim.tokens_per_day,
            per_month=lim.tokens_per_month,
            keep_s=KEEP_S,
        )

    def admit(self, owner: str, job_id: str, cost: int, prompt_tokens: int) -> Window:
        """Charge one request of `cost` tokens for `job_id` to `owner`, unless over a limit
        or a budget (then nothing is charged and the verdict says which)."""
        answer = self._admit.send(None, self._args("admit", owner, job_id, cost, prompt_tokens))
        return Window.parse(ADMIT.answer(answer), self.of(owner))

    def peek(self, owners: list[str]) -> list[Window]:
        """The current limits and use of each key name, in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for owner in owners:
            self._admit.send(pipe, self._args("peek", owner, "", 0, 0))
        return [
            Window.parse(ADMIT.answer(answer), self.of(owner))
            for owner, answer in zip(owners, pipe.execute(), strict=True)
        ]

    def settle(self, owner: str, job_id: str, how: str, tokens: int = 0) -> int | None:
        """Replace what `job_id` held by what it used ('exact' `tokens`; 'prompt': its prompt
        count plus `tokens`; 'keep': what it held); the tokens it is charged in the end, or
        None when it held nothing (settled before, or never charged)."""
        used = self._settle(
            state=state_key(owner),
            held=held_key(owner),
            job=job_id,
            how=how,
            tokens=tokens,
            tpm=self.of(owner).tokens_per_minute,
        )
        return None if used < 0 else used

    def holder(self, job_id: str, owners: list[str]) -> str | None:
        """Which of `owners` holds a reservation for `job_id` (its record being gone)."""
        pipe = self.redis.pipeline(transaction=False)
        for owner in owners:
            pipe.hexists(held_key(owner), job_id)
        found = [owner for owner, held in zip(owners, pipe.execute(), strict=True) if held]
        return found[0] if found else None


def duration_text(seconds: float) -> str:
    """A duration as OpenAI's `x-ratelimit-reset-*` headers write one: `0s`, `250ms`,
    `1s`, `8.64s`, `6m0s`, `1h2m3s` (Go's notation, to the millisecond)."""
    ms = max(0, math.ceil(seconds * 1000))
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs = f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    return f"{minutes}m{secs}" if minutes else secs
