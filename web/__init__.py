"""chatq's HTTP front end; the app factory is `web.app:create_app`.

Deliberately imports nothing: `python -m web` starts gunicorn, whose gevent workers
monkey-patch the standard library before the application is imported.
"""
