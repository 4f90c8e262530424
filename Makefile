# Two commands do all set-up on a fresh machine:
#   make train   creates .venv, installs planet-sac with its extras (uv, from PyPI: about 20 s where pip took 43-70), trains the default agent
#   make test    same set-up, then ruff, mypy (planet_sac/, configured in pyproject.toml), the large-file check (scripts/check_large_files.py) and the test suite (TEST_WORKERS=3 pytest-xdist processes: on 2 cores the third uses the time the others wait on subprocesses; 0 runs it serially)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
CONFIG ?= configs/pendulum.yaml
LOGDIR ?= logdir/pendulum
TEST_WORKERS ?= 3
export MUJOCO_GL ?= egl

.PHONY: install train evaluate test bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check uv
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e ".[dmc,test]"  # --compile-bytecode: as pip does; where PYTHONDONTWRITEBYTECODE is set (as here), every process would otherwise compile TensorFlow from source (make test 7m15 -> 9m21)
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
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) scripts/check_large_files.py
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=15

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
