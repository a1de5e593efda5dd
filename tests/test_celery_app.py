"""chatq/broker/celery_app.py: what the Celery app is built with, in-process."""

from __future__ import annotations

import threading

from chatq.broker.celery_app import make_celery
from chatq.config import settings as config


def test_the_app_builds_its_result_backend_once_not_once_per_thread() -> None:
    # A gevent pool runs each task in a greenlet, a thread to Celery: a backend per thread
    # was one built for every job (~4.6 % of a busy worker's CPU under the fairness flood).
    app = make_celery(config.load({}))
    seen = []
    thread = threading.Thread(target=lambda: seen.append(app.backend))
    thread.start()
    thread.join()
    assert seen == [app.backend]
    assert app.backend.as_uri() == "disabled://"  # no results are kept
