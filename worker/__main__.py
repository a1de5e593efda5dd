"""`python -m worker`: a Celery worker on the job queues of its lanes (CHATQ_WORKER_LANES,
both by default), `interactive` first, then the webhook deliveries' queue; set by CHATQ_*."""

from __future__ import annotations

from chatq import config

if config.load().worker_pool == "gevent":
    # Before anything else is imported, so that sockets and locks cooperate.
    from chatq import gevent_patch

    gevent_patch.patch_all()


def main() -> None:
    """Run the worker until it is stopped; exit with the worker's status."""
    from celery.bin.celery import celery

    from chatq.celery_app import worker_queues
    from worker.tasks import app, settings

    # Not app.worker_main: it drops the worker's exit status, so a worker that gave up exited 0.
    celery.main(
        prog_name="python -m worker",
        args=[
            "--app=worker.tasks:app",
            "worker",
            f"--pool={settings.worker_pool}",
            f"--concurrency={settings.worker_concurrency}",
            f"--queues={','.join(worker_queues(app, settings.worker_lanes))}",
            f"--loglevel={settings.log_level}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
    )


if __name__ == "__main__":
    main()
