"""The keys' limits in the worker: the relay handler that replaces what an ended job held by
what it used (chatq/admission/quotas.py), and the admission of batch lines as they are fed."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from chatq import jobs, keys
from chatq.admission import ADMITTED, HELD, QUOTA_REFUSALS, RATE_REFUSALS, Limits, Window
from chatq.chat import count_prompt_tokens, count_text
from chatq.jobs import Ended
from worker import run
from worker.context import WorkerContext

RECORD_FIELDS = ("owner", "model", "cached", "leader", "attempts", "result")
TOKENS_USED = Counter(
    "chatq_key_tokens_total", "Tokens used by each key's jobs, counted as each job ends", ["key"]
)
_limits: dict[int, tuple[WorkerContext, Limits]] = {}


def limits_of(ctx: WorkerContext) -> Limits:
    """This process's view of the keys' limits (made again for another context: a test's)."""
    found = _limits.get(ctx.pid)
    if found is None or found[0] is not ctx:
        found = _limits[ctx.pid] = (ctx, Limits(ctx.store.redis, ctx.settings))
    return found[1]


def _usage_total(result: str | None) -> int | None:
    """The upstream's count of a completion's tokens, if it gave one."""
    try:
        usage = (json.loads(result) if result else {}).get("usage")
    except (ValueError, AttributeError):
        return None
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int):
        return total
    parts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
    return sum(parts) if all(isinstance(p, int) for p in parts) else None  # type: ignore[arg-type]


def used_by(record: dict[str, str], text: str) -> tuple[str, int]:
    """What a job used, as limits_settle.lua takes it: ('exact', tokens), or ('prompt',
    tokens of its output) when the upstream was called and gave no usage."""
    if record.get("cached") == "1" or record.get("leader"):
        return "exact", 0  # answered from the cache, or by the upstream call of another job
    total = _usage_total(record.get("result"))
    if total is not None:
        return "exact", total
    if int(record.get("attempts") or 0) == 0:
        return "exact", 0  # the upstream was never called
    return "prompt", count_text(record.get("model", ""), text)


@run.handler
def settle(ctx: WorkerContext, ended: Ended) -> None:
    """A job ended: what it held for its key's limits is replaced by what it used, once."""
    limits = limits_of(ctx)
    if not limits.enabled:
        return
    pipe = ctx.store.redis.pipeline(transaction=False)
    pipe.hmget(keys.job(ended.job_id), RECORD_FIELDS)
    pipe.get(keys.text(ended.job_id))
    values, text = pipe.execute()
    record = {k: str(v) for k, v in zip(RECORD_FIELDS, values, strict=True) if v is not None}
    owner = record.get("owner")
    if owner:
        how, tokens = used_by(record, str(text or ""))
    else:
        # Deleted before its end was read (a `store: false` response): what it held stands.
        owner = limits.holder(ended.job_id, sorted({n for n, _ in ctx.settings.api_keys}))
        how, tokens = "keep", 0
    used = limits.settle(owner, ended.job_id, how, tokens) if owner else None
    if owner and used is not None:
        TOKENS_USED.labels(owner).inc(used)


@dataclass(frozen=True)
class LineAdmission:
    """What a key's limits say of a batch line: `go` (and whether tokens were charged now),
    `wait` (over a minute's limit: it stays in its file for a later turn; the answer carries
    its cost and prompt tokens, for admit_counted), or `refused` with the code and message of
    its error line (over a budget, or too large to ever pass)."""

    go: bool
    charged: bool = False
    wait: bool = False
    code: str = ""
    message: str = ""
    prompt_tokens: int | None = None
    cost: int = 0

    @property
    def record_fields(self) -> dict[str, str]:
        """What the line's job record keeps of this admission: its prompt's count, if made."""
        return jobs.counted_fields(self.prompt_tokens)


# The prompt tokens of the lines waiting for their key's minute limits, by job id: a line is
# tried again every turn of its batch until it passes, and counted only the first time.
# Bounded: a batch cancelled while a line waits leaves its entry until newer ones push it out.
MAX_WAITING_LINES = 10_000
_waiting: OrderedDict[str, int] = OrderedDict()


def _prompt_tokens(job_id: str, request: dict[str, Any]) -> int:
    """The line's prompt tokens, counted when it first waited or now."""
    counted = _waiting.pop(job_id, None)
    return count_prompt_tokens(request) if counted is None else counted


def _keep_waiting(job_id: str, cost: int, prompt_tokens: int) -> LineAdmission:
    _waiting[job_id] = prompt_tokens
    while len(_waiting) > MAX_WAITING_LINES:
        _waiting.popitem(last=False)
    return LineAdmission(go=False, wait=True, prompt_tokens=prompt_tokens, cost=cost)


def admit_line(
    ctx: WorkerContext, owner: str, job_id: str, request: dict[str, Any]
) -> LineAdmission:
    """Charge a batch line to its key's limits before its job is made; the answer carries
    the line's prompt tokens when they were counted."""
    limits = limits_of(ctx)
    if not limits.enabled:
        return LineAdmission(go=True)
    prompt_tokens = _prompt_tokens(job_id, request)
    return admit_counted(ctx, owner, job_id, limits.cost(request, prompt_tokens), prompt_tokens)


def admit_counted(
    ctx: WorkerContext, owner: str, job_id: str, cost: int, prompt_tokens: int
) -> LineAdmission:
    """admit_line for a line whose cost and prompt tokens are known (from its wait's answer):
    a line kept while it waits (worker/batches/waiting.py) is retried without its request."""
    limits = limits_of(ctx)
    if not limits.enabled:
        return LineAdmission(go=True)
    _waiting.pop(job_id, None)
    window = limits.admit(owner, job_id, cost, prompt_tokens)
    if window.verdict in RATE_REFUSALS:
        return _keep_waiting(job_id, cost, prompt_tokens)
    if window.verdict not in (ADMITTED, HELD):
        return _refused(owner, window, cost)
    charged = window.verdict == ADMITTED and cost > 0
    return LineAdmission(go=True, charged=charged, prompt_tokens=prompt_tokens)


def _refused(owner: str, window: Window, cost: int) -> LineAdmission:
    """A line over its key's budget, or too large to ever pass its minute's limit."""
    if window.verdict in QUOTA_REFUSALS:
        period = "daily" if window.verdict == "day" else "monthly"
        return LineAdmission(
            False,
            code="insufficient_quota",
            message=(
                f"Key {owner} is over its {period} token budget; this request may use up to "
                f"{cost} tokens."
            ),
        )
    return LineAdmission(
        False,
        code="rate_limit_exceeded",
        message=(
            f"This request may use up to {cost} tokens, more than the "
            f"{window.limits.tokens_per_minute} a minute its key allows."
        ),
    )


def release_line(ctx: WorkerContext, owner: str, job_id: str) -> None:
    """A line charged for `job_id` made no job (it had one already): it used nothing more."""
    limits_of(ctx).settle(owner, job_id, "exact", 0)
