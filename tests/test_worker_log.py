"""The worker's log says each job's start and end once, in chatq's own lines: Celery's line
for each message received and each task done is left out below CHATQ_LOG_LEVEL=DEBUG."""

from __future__ import annotations

from tests.conftest import Stack
from tests.procs import wait_until


def test_a_job_is_logged_once_at_its_start_and_once_at_its_end(stack: Stack) -> None:
    job = stack.submit("logged once", wait=10).json()
    assert job["status"] == "completed", job

    def lines() -> list[str]:
        logs = [p.log_text() for p in stack.procs if p.name == "worker"]
        return [line for log in logs for line in log.splitlines() if job["id"] in line]

    wait_until(lambda: [ln for ln in lines() if f"job {job['id']} completed" in ln], 5, "the end")
    assert [line for line in lines() if f"job {job['id']} in_progress" in line], lines()
    # Celery's own: "Task chatq.run_job[<job id>] received", "… succeeded in 0.01s: None".
    assert not [line for line in lines() if "Task chatq.run_job" in line], lines()
