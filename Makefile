# flopplan: `make demo` runs the main job, `make test` installs what the tests need and runs them all, with the docs
# build (`make test-fast`: all but the slow ones).
# Both create .venv when missing. A torch already importable by $(PYTHON) (a GPU user's build) is kept:
# the venv then sees it through --system-site-packages and pip never replaces it.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build on this machine's disk; elsewhere pip fetches it.
TORCH ?= torch==2.13.0
PYTEST_ARGS ?=
TEST_EXTRAS := .[torch,trl,data,math,ray,test]

HAS_TORCH := $(shell $(PYTHON) -c 'import torch' >/dev/null 2>&1 && echo yes)

.PHONY: demo test test-fast lint docs docs-outputs bench tables clean

$(BIN)/python:
	$(PYTHON) -m venv $(if $(HAS_TORCH),--system-site-packages) $(VENV)

$(VENV)/.core-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	@touch $@

# The test tools go in with uv (from PyPI; pip resolves and downloads them one at a time: ~57 s against ~13 s here),
# pinned to the torch the venv already has, so a dependency that wants another torch fails to resolve instead of
# pulling a CUDA build. Where torch comes from outside the venv (a GPU user's build, seen through
# --system-site-packages) pip installs them: uv (0.13.9, checked) installs a package the system site-packages
# already holds into the venv again, which for torch would be a second, CUDA, build.
$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -c 'import torch' >/dev/null 2>&1 || $(BIN)/python -m pip install -q --no-compile "$(TORCH)"
ifeq ($(HAS_TORCH),yes)
	$(BIN)/python -m pip install -q --no-compile -e '$(TEST_EXTRAS)'
else
	$(BIN)/python -m pip install -q uv
	$(BIN)/python -c 'import torch; print("torch==" + torch.__version__)' > $(VENV)/torch-pin.txt
	$(BIN)/uv pip install -q --python $(BIN)/python --constraint $(VENV)/torch-pin.txt -e '$(TEST_EXTRAS)'
endif
	@touch $@ $(VENV)/.core-installed

demo: $(VENV)/.core-installed
	$(BIN)/flopplan plan

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/mypy

# Bytecode is written as modules are first imported, whatever PYTHONDONTWRITEBYTECODE says (this machine sets it):
# the tests start many `python -m flopplan` processes (pilots, kills, engines), and without cached bytecode each
# would compile flopplan, torch and transformers again (~0.8 s for flopplan alone, ~15 s for all it imports);
# compiling only what is imported, once, is quicker than compiling all of site-packages up front (~57 s here).
test test-fast: export PYTHONDONTWRITEBYTECODE :=

# Every test (CI runs this); test-fast skips the ones marked slow (over ~3 s each here: real training runs, 7B-72B
# meta-device counts, calibration sweeps, statistical simulations; pytest's summary names any unmarked one over 3 s).
# Tests that share a module fixture carry an xdist_group mark and run on one worker. The lint and the docs build
# run beside the tests (about 20 s of CPU that waited a minute for its turn on 2 cores before them); their output
# follows the tests', and any of the three failing fails the target.
CHECKS_LOG := $(VENV)/checks.log

test: $(VENV)/.test-installed
	@$(MAKE) --no-print-directory lint docs > $(CHECKS_LOG) 2>&1 & checks=$$!; \
	$(BIN)/python -m pytest -n auto --dist loadgroup $(PYTEST_ARGS); tests=$$?; \
	wait $$checks; status=$$?; cat $(CHECKS_LOG); \
	if [ $$status -ne 0 ]; then echo "make test: the lint or the docs build failed (above)"; fi; \
	[ $$tests -eq 0 ] && [ $$status -eq 0 ]

test-fast: lint
	$(BIN)/python -m pytest -n auto --dist loadgroup -m "not slow" $(PYTEST_ARGS)

# The docs site (mkdocs, Material, mkdocstrings) into site/; --strict turns every warning (a broken link, a missing
# output snippet) into a failure. NO_MKDOCS_2_WARNING silences Material's notice about MkDocs 2.
docs: $(VENV)/.test-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Every command output the docs show, and the CLI reference, regenerated (tests/test_docs.py fails when one is
# stale). SLOW=1 also reruns the slow ones: training runs, TRL, RACE's demo, calibration, benchmarks (an hour).
docs-outputs: $(VENV)/.test-installed
	$(BIN)/python scripts/docs_outputs.py $(if $(SLOW),--slow)

bench: $(VENV)/.core-installed
	$(BIN)/python benchmarks/plan_throughput.py
	$(BIN)/python benchmarks/peer_formulas.py

tables: $(VENV)/.core-installed
	$(BIN)/flopplan tables

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site
