# The two commands a user needs: `make pipeline` (set-up + dvc repro) and `make test`.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
TORCH   := torch==2.13.0
UV      := uv==0.13.9

.PHONY: setup setup-pipeline setup-serve lock
.PHONY: browser pipeline test test-fast check-results lint format clean

# A role's venv: $(call install,VENV,ROLE), ROLE serve, pipeline or dev (requirements/ROLE.txt).
# Its lock goes in with --no-deps --require-hashes: exactly its files, each checked against its hash.
# torch alone is pinned by version, not hash: its files differ by build. It comes from pip's own
# configuration (PyPI's Linux wheel is the CUDA build, with the CUDA packages its metadata pins), or
# with TORCH_INDEX from that index alone, e.g. PyTorch's CPU index
# (`make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu`), whose build needs nothing more.
TORCH_FROM = $(if $(TORCH_INDEX),--no-deps --index-url "$(TORCH_INDEX)")
define install
	$(PY) -m venv $(1)
	$(1)/bin/pip install -q --no-deps --require-hashes -r requirements/$(2).txt
	$(if $(filter-out serve,$(2)),$(1)/bin/pip install -q $(TORCH_FROM) "$(TORCH)")
	$(1)/bin/pip install -q --no-deps $(if $(filter-out serve,$(2)),-e) .
endef

$(STAMP): pyproject.toml requirements/dev.txt
	$(call install,$(VENV),dev)
	touch $(STAMP)

setup: $(STAMP)  ## .venv with the pinned stack of `make pipeline` and `make test` (torch: above)

setup-pipeline:  ## the pipeline alone, without the test tools, in .venv-pipeline
	$(call install,.venv-pipeline,pipeline)

setup-serve:  ## the serving role alone (no torch, Lightning, Ray, MLflow, DVC) in .venv-serve
	$(call install,.venv-serve,serve)

# Re-resolves the locks with uv (in .venv-lock), keeping their pins where pyproject.toml allows:
# dev first, then pipeline and serve at dev's versions; torch and requirements/excludes.txt left out.
LOCK = .venv-lock/bin/uv pip compile -q --generate-hashes --python-version 3.11 \
	--python-platform x86_64-manylinux_2_28 --excludes requirements/excludes.txt \
	--no-emit-package torch --custom-compile-command "make lock"
lock:  ## re-generate requirements/{dev,pipeline,serve}.txt (hashed) from pyproject.toml
	[ -x .venv-lock/bin/uv ] || { $(PY) -m venv .venv-lock && .venv-lock/bin/pip install -q "$(UV)"; }
	$(LOCK) pyproject.toml --extra dev requirements/minilm.in -o requirements/dev.txt
	$(LOCK) pyproject.toml --extra pipeline requirements/minilm.in -c requirements/dev.txt \
	  -o requirements/pipeline.txt
	$(LOCK) pyproject.toml -c requirements/dev.txt -o requirements/serve.txt

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
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -m "not slow" -n 2

# After a full re-run (not part of `make test` or CI, which check agreement only): fails while `dvc status` lists a
# changed dependency kept in git, while the committed results disagree with dvc.lock, or while README.md is not what
# `attention-lab readme` writes. See docs/pipeline.md, "Results and their provenance".
check-results: $(STAMP)  ## are the committed results fresh, and do they agree with dvc.lock and the README?
	$(BIN)/attention-lab readme --check

lint: $(STAMP)  ## ruff's lint and format checks (tests/test_style.py runs them too)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: $(STAMP)  ## rewrite the code in the project's style (ruff format, lines at most 100 columns)
	$(BIN)/ruff format src tests benchmarks

clean:
	rm -rf $(VENV) .venv-pipeline .venv-serve .venv-lock
