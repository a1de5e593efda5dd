"""gunicorn and its gevent worker: what `python -m web` starts before it loads the app."""

from web.server.gunicorn_errors import install
from web.server.gunicorn_worker import worker_class

__all__ = ["install", "worker_class"]
