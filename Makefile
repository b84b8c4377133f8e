# flopplan: `make demo` runs the main job, `make test` installs what the tests need and runs them all
# (`make test-fast`: all but the slow ones).
# Both create .venv when missing. A torch already importable by $(PYTHON) (a GPU user's build) is kept:
# the venv then sees it through --system-site-packages and pip never replaces it.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build on this machine's disk; elsewhere pip fetches it.
TORCH ?= torch==2.13.0
PYTEST_ARGS ?=

HAS_TORCH := $(shell $(PYTHON) -c 'import torch' >/dev/null 2>&1 && echo yes)

.PHONY: demo test test-fast lint bytecode bench tables clean

$(BIN)/python:
	$(PYTHON) -m venv $(if $(HAS_TORCH),--system-site-packages) $(VENV)

$(VENV)/.core-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	@touch $@

# pip compiles bytecode on one core; compileall -j 0 does it on all of them, after both installs (a file that does
# not compile, such as a package's deliberately broken test data, is skipped silently, as pip skips it).
$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -c 'import torch' >/dev/null 2>&1 || $(BIN)/python -m pip install -q --no-compile "$(TORCH)"
	$(BIN)/python -m pip install -q --no-compile -e '.[torch,trl,test]'
	$(BIN)/python -m compileall -q -j 0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
		>/dev/null 2>&1 || true
	@touch $@ $(VENV)/.core-installed

demo: $(VENV)/.core-installed
	$(BIN)/flopplan plan

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/mypy

# flopplan's own bytecode is compiled first: the tests start many `python -m flopplan` processes (pilots, kills,
# engines), and where PYTHONDONTWRITEBYTECODE is set (this machine) each would compile the package again (0.8 s).
bytecode: $(VENV)/.test-installed
	$(BIN)/python -m compileall -q flopplan >/dev/null

# Every test (CI runs this); test-fast skips the ones marked slow (real training runs, 14B-72B meta-device counts,
# calibration sweeps). Tests that share a module fixture carry an xdist_group mark and run on one worker.
test: lint bytecode
	$(BIN)/python -m pytest -n auto --dist loadgroup $(PYTEST_ARGS)

test-fast: lint bytecode
	$(BIN)/python -m pytest -n auto --dist loadgroup -m "not slow" $(PYTEST_ARGS)

bench: $(VENV)/.core-installed
	$(BIN)/python benchmarks/plan_throughput.py
	$(BIN)/python benchmarks/peer_formulas.py

tables: $(VENV)/.core-installed
	$(BIN)/flopplan tables

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
