# Two commands do all set-up on a fresh machine:
#   make train      creates .venv, installs planet-sac with its extras (uv, from PyPI), trains the default agent
#   make test       the same set-up, then ruff, mypy (planet_sac/), the large-file check and every test but `e2e`
#   make test-e2e   the `e2e` tests: scenarios of several TensorFlow processes (CI runs them after `make test`)
#   make test-fast  the tests not marked `slow` (no subprocesses, no end-to-end runs): the inner loop
# TEST_WORKERS pytest-xdist processes (0: serially), one per core; idle ones take queued tests from busy ones
# (worksteal); more than the cores cost CPU time (docs/performance.md has what each target takes).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
CONFIG ?= configs/pendulum.yaml
LOGDIR ?= logdir/pendulum
TEST_WORKERS ?= 2
export MUJOCO_GL ?= egl
# Each module's bytecode is written by the first process that imports it, even where the environment sets
# PYTHONDONTWRITEBYTECODE (else every process would compile TensorFlow again): compiling all 13,656 installed
# files at install time (uv --compile-bytecode) cost more than compiling the 4,700 the tests import (docs/testing.md).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install train evaluate test test-e2e test-fast bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv --without-pip $(VENV)
	@# uv installed into the venv by the system's pip (>= 22.3: --python), or else by the venv's own, bootstrapped
	@# (ensurepip: 7 s, most of a fresh install's set-up); uv then installs pip beside the project, in under a second
	$(PYTHON) -m pip --python $(PY) install --quiet --disable-pip-version-check uv 2>/dev/null || \
		{ $(PY) -m ensurepip --default-pip >/dev/null && $(PY) -m pip install --quiet --disable-pip-version-check uv; }
	$(VENV)/bin/uv pip install --quiet --python $(PY) -e ".[dmc,test]" pip
	touch $(STAMP)

install: $(STAMP)

train: $(STAMP)
	$(PY) -m planet_sac train --config $(CONFIG) --logdir $(LOGDIR)
	$(PY) -m planet_sac evaluate --logdir $(LOGDIR) --episodes 5 --policy random cem sac

evaluate: $(STAMP)
	$(PY) -m planet_sac evaluate --logdir $(LOGDIR) --episodes 5 --policy random cem sac sac_guided_cem

bench: $(STAMP)
	$(PY) -m planet_sac bench --json bench/results/bench.json

test: $(STAMP)
	@# the checks on one core while the other imports (and so compiles) what every test process imports first
	$(PY) -c "from planet_sac import Trainer; import planet_sac.cli" & importing=$$!; \
	$(VENV)/bin/ruff check . && $(VENV)/bin/mypy && $(PY) scripts/check_large_files.py; checks=$$?; \
	wait $$importing; exit $$checks
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not e2e" --durations=15

test-e2e: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m e2e --durations=5

test-fast: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not slow" --durations=5

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
