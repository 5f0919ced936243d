# The two commands a user needs: `make pipeline` (set-up + dvc repro) and `make test`.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: setup browser pipeline test test-fast check-results lint clean

# TORCH_INDEX (optional): a wheel index to take torch from first, e.g. PyTorch's CPU index
# (`make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu`: PyPI's Linux torch wheel is the CUDA build). Unset,
# torch comes from pip's own configuration, like every other package.
$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(if $(TORCH_INDEX),$(BIN)/pip install -q --no-deps --index-url "$(TORCH_INDEX)" -c constraints.txt torch)
	$(BIN)/pip install -q -c constraints.txt -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)  ## create .venv with the pinned stack (CPU-only torch: see TORCH_INDEX above)

# Debian's chromium + chromedriver for the explorer page test (Selenium never downloads a browser or driver),
# and a Hangul font for its screenshots; skipped when already installed (else apt-get, with sudo unless root).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && fc-list 2>/dev/null | grep -q Nanum || \
	  { SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	    $$SUDO apt-get update && $$SUDO apt-get install -y chromium chromium-driver fonts-nanum; }

# `dvc repro` with the families' chains of stages side by side, one per core (attention-lab repro; JOBS=1: one at a time).
# TRAINER=gpu (or auto: gpu where torch sees a CUDA GPU) sets params.yaml `trainer:` first; it stays set (docs/scaling.md)
pipeline: $(STAMP)  ## run the whole DVC pipeline on the built-in data
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/attention-lab repro $(if $(JOBS),--jobs $(JOBS)) $(if $(TRAINER),--trainer $(TRAINER))

# A test file per core, one thread each: two workers' OpenMP threads spinning on the same cores slow both many-fold.
# Files go out in tests/conftest.py's order, the longest first. `make test` installs the browser and sets
# REQUIRE_BROWSER=1, so its tests fail without one (as they do wherever CI is set); `make test-fast` needs no root
# and skips them when chromium or chromedriver is missing (`make browser` installs both).
test: $(STAMP) browser  ## run the whole test suite (end-to-end included)
	REQUIRE_BROWSER=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

test-fast: $(STAMP)  ## unit tests only (the browser's tests skip without `make browser`)
	$(BIN)/python -m pytest -m "not slow"

# After a full re-run (not part of `make test` or CI, which check agreement only): fails while `dvc status` lists a
# changed dependency kept in git, while the committed results disagree with dvc.lock, or while README.md is not what
# `attention-lab readme` writes. See docs/pipeline.md, "Results and their provenance".
check-results: $(STAMP)  ## are the committed results fresh, and do they agree with dvc.lock and the README?
	$(BIN)/attention-lab readme --check

lint: $(STAMP)
	$(BIN)/ruff check src tests

clean:
	rm -rf $(VENV)
