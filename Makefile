# The two commands a user needs: `make pipeline` (set-up + dvc repro) and `make test`.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: setup pipeline test test-fast lint clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)  ## create .venv with the pinned, CPU-only stack

pipeline: $(STAMP)  ## run the whole DVC pipeline on the built-in data
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

test: $(STAMP)  ## run the whole test suite (end-to-end included)
	$(BIN)/python -m pytest

test-fast: $(STAMP)  ## unit tests only
	$(BIN)/python -m pytest -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check src tests

clean:
	rm -rf $(VENV)
