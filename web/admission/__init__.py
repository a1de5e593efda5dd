"""Admission control in the web: rate limits, budgets, held requests."""

from web.admission.control import Admission, add_rate_headers
from web.admission.holds import HeldCounts, hold, holds_open, mark_unheld, poll_wait

__all__ = [
    "Admission",
    "HeldCounts",
    "add_rate_headers",
    "hold",
    "holds_open",
    "mark_unheld",
    "poll_wait",
]
