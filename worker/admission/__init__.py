"""The worker's side of per-key limits."""

from worker.admission.quotas import LineAdmission, admit_counted, admit_line, release_line

__all__ = ["LineAdmission", "admit_counted", "admit_line", "release_line"]
