"""gunicorn and its gevent worker: what `python -m web` starts before it loads the app."""
