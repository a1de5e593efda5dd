"""Who may run what, when: per-key limits and budgets, fair dispatch, pacing."""

from chatq.admission.fairness import (
    LANES,
    RUNNING_REFRESH_S,
    Plan,
    RunningCounts,
    TenantCycle,
    park_s,
    plan,
    queue_name,
)
from chatq.admission.pacing import Pacing, Seen, parse_number
from chatq.admission.quotas import (
    ADMITTED,
    HELD,
    QUOTA_REFUSALS,
    RATE_REFUSALS,
    TOO_LARGE,
    Limits,
    Window,
    duration_text,
)

__all__ = [
    "ADMITTED",
    "HELD",
    "LANES",
    "QUOTA_REFUSALS",
    "RATE_REFUSALS",
    "RUNNING_REFRESH_S",
    "TOO_LARGE",
    "Limits",
    "Pacing",
    "Plan",
    "RunningCounts",
    "Seen",
    "TenantCycle",
    "Window",
    "duration_text",
    "park_s",
    "parse_number",
    "plan",
    "queue_name",
]
