"""`python -m worker`: a Celery worker on the job queues of its lanes (CHATQ_WORKER_LANES,
both by default), `interactive` first, then the webhook deliveries' queue; set by CHATQ_*."""

from __future__ import annotations

import sys

from chatq import config

if config.load().worker_pool == "gevent":
    # Before anything else is imported, so that sockets and locks cooperate.
    from chatq import gevent_patch

    gevent_patch.patch_all()


def main() -> None:
    """Run the worker until it is stopped; exit with the worker's status."""
    from celery import concurrency
    from celery.exceptions import SecurityError
    from celery.utils.log import mlevel

    from chatq.broker import worker_queues
    from worker.tasks import app, settings

    # What `celery worker` does with these options, without loading Celery's command line: its
    # interactive shells' prompt_toolkit alone was 0.2 s of each start. Not app.worker_main,
    # which goes through that command line and drops the exit status of a worker that gave up.
    worker = app.Worker(
        pool_cls=concurrency.get_implementation(settings.worker_pool),
        concurrency=settings.worker_concurrency,
        queues=list(worker_queues(app, settings.worker_lanes)),
        loglevel=mlevel(settings.log_level.upper()),
        without_gossip=True,
        without_mingle=True,
        without_heartbeat=True,
    )
    try:
        worker.start()
    except SecurityError as error:
        sys.exit(f"python -m worker: {error}")
    sys.exit(worker.exitcode)


if __name__ == "__main__":
    main()
