"""gunicorn and its gevent worker, and the server's own pages (probes, demo)."""
