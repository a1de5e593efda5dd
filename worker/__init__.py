"""chatq's worker; `celery -A worker worker` finds its Celery app as `worker.app`.

The app is imported lazily, so that `python -m worker` can monkey-patch the standard
library for gevent before Celery, redis or requests are loaded.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from worker.tasks import app

        return app
    raise AttributeError(name)
