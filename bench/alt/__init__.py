"""What a user would build instead of chatq: Flask + Celery with its result backend."""
