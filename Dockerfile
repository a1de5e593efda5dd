# One image for every chatq process, chosen by command:
#   python -m web        (the default: the HTTP API under gunicorn + gevent)
#   python -m worker     (the Celery worker)
#   python -m fakellm --host 0.0.0.0 --port 9100   (the fake upstream)
# All settings are CHATQ_* environment variables (chatq/config.py).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CHATQ_BIND=0.0.0.0:8000

WORKDIR /app

# Dependencies first, so that a change of source does not reinstall them.
COPY requirements.txt ./
RUN pip install -r requirements.txt

RUN useradd --create-home --uid 10001 --user-group chatq

COPY chatq/ chatq/
COPY web/ web/
COPY worker/ worker/
COPY fakellm/ fakellm/

USER chatq
EXPOSE 8000

CMD ["python", "-m", "web"]
