# Understudy developer commands. `make` (or `make help`) lists them; `make test` is what CI runs.
# Targets call tools through .venv/bin/, so nothing needs activating.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

VENV := .venv
PY := $(VENV)/bin/python
PNPM_VERSION := 12.4.2
# scripts/bootstrap falls back to npx when pnpm cannot be installed globally; so do we.
PNPM := $(shell command -v pnpm >/dev/null 2>&1 && echo pnpm || echo npx --yes pnpm@$(PNPM_VERSION))

# Folders that only codegen writes; CI fails if regenerating them changes anything.
GENERATED := backend/src/understudy/generated connector/src/understudy_connector/generated \
	packages/protocol/src/generated docs/reference synthetic-users/src/synthetic_users/generated

EXTENSION_ZIP := extension/understudy-extension.zip

.PHONY: help bootstrap lock codegen check-codegen lint format typecheck test-py test-ext test-ts extension \
	extension-store dist test run study clean fuzz

help: ## List the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) \
		| awk 'BEGIN {FS = ":.*## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

bootstrap: ## Install the venv, node_modules and Chromium (idempotent; safe to re-run)
	scripts/bootstrap

lock: ## Rewrite requirements/dev.txt from the current .venv (after a deliberate pip install)
	{ grep '^#' requirements/dev.txt; $(PY) -m pip freeze --exclude-editable; } > requirements/dev.txt.tmp
	mv requirements/dev.txt.tmp requirements/dev.txt

codegen: ## Regenerate Python and TypeScript types from spec/
	$(PY) -m codegen

check-codegen: codegen ## Fail if the generated files differ from what codegen writes
	@status="$$(git status --porcelain -- $(GENERATED))"; \
	if [ -n "$$status" ]; then \
		echo "Generated files are out of date; run 'make codegen' and commit the result:"; \
		echo "$$status"; \
		git --no-pager diff --stat -- $(GENERATED); \
		git --no-pager diff -- $(GENERATED); \
		exit 1; \
	fi

lint: ## Ruff lint and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: ## Apply ruff fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: ## mypy (strict) on Python, tsc (strict) on the extension and packages/*
	$(VENV)/bin/mypy
	$(PNPM) -C extension typecheck
	$(PNPM) --filter @understudy/protocol --filter @understudy/connector typecheck

test-py: ## Python tests (pytest)
	$(VENV)/bin/pytest

test-ext: ## Extension unit tests (vitest)
	$(PNPM) -C extension test

test-ts: ## Unit tests of @understudy/protocol and @understudy/connector (vitest)
	$(PNPM) --filter @understudy/protocol test
	$(PNPM) --filter @understudy/connector test

extension: ## Build extension/dist and zip it to extension/understudy-extension.zip
	$(PNPM) -C extension build
	rm -f $(EXTENSION_ZIP)
	cd extension/dist && ../../$(PY) -m zipfile -c ../understudy-extension.zip *
	@echo "wrote $(EXTENSION_ZIP)"

extension-store: extension ## The Chrome Web Store zip: no manifest key, no source maps (extension/STORE.md)
	$(PY) extension/tools/store_zip.py

DIST := dist

dist: extension ## Build the three wheels and the extension zip into dist/ (docs/versioning.md)
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir $(DIST) ./backend ./connector \
		./synthetic-users
	cp $(EXTENSION_ZIP) $(DIST)/understudy-extension-$$($(PY) -c \
		'import json; print(json.load(open("extension/manifest.json"))["version"])').zip
	@ls -1 $(DIST)

test: ## THE test command (CI): bootstrap, check-codegen, lint, typecheck, test-py, test-ext, test-ts
	$(MAKE) bootstrap
	$(MAKE) check-codegen
	$(MAKE) lint
	$(MAKE) typecheck
	$(MAKE) test-py
	$(MAKE) test-ext
	$(MAKE) test-ts

fuzz: ## Long Schemathesis runs over both specs (Understudy: under 10,000 cases fails; seeds: *_FUZZ_SEED)
	UNDERSTUDY_FUZZ_EXAMPLES=$${UNDERSTUDY_FUZZ_EXAMPLES:-1500} UNDERSTUDY_FUZZ_MIN_CASES=10000 \
		$(VENV)/bin/pytest tests/contract -q -p no:cacheprovider
	SYNTHETIC_USERS_FUZZ_EXAMPLES=$${SYNTHETIC_USERS_FUZZ_EXAMPLES:-500} \
		SYNTHETIC_USERS_FUZZ_MIN_CASES=$${SYNTHETIC_USERS_FUZZ_MIN_CASES:-10000} \
		$(VENV)/bin/pytest tests/contract_su -q -p no:cacheprovider

study: bootstrap ## Synthetic Users' main job: three personas study the demo shop (ARGS=--serve keeps the dashboard up)
	$(PY) -m study $(ARGS)

run: bootstrap ## The main job: backend on SQLite + Chromium with the extension + a governed workflow (ARGS=--serve keeps it up)
	$(PY) -m demo $(ARGS)

serve: bootstrap ## Only the backend on the embedded default, until Ctrl-C
	$(VENV)/bin/understudy serve

.PHONY: bench
bench: ## Benchmarks (bench/README.md): tables + bench/results/*.json; QUICK=1 for the ~3 min slice
	$(PY) -m bench $(if $(QUICK),--quick)


.PHONY: bench-compare
bench-compare: ## The quick non-Chromium benchmarks of BASE=<rev> vs this tree (or HEAD=<rev>) in one run
	@test -n "$(BASE)" || { echo "make bench-compare: set BASE=<rev>, e.g. BASE=main" >&2; exit 2; }
	$(PY) -m bench.compare --base $(BASE) $(if $(HEAD),--head $(HEAD)) $(if $(ROUNDS),--rounds $(ROUNDS))

clean: ## Remove build outputs and tool caches (keeps .venv and node_modules)
	rm -rf extension/dist $(EXTENSION_ZIP) extension/understudy-extension-store.zip $(DIST) .mypy_cache .ruff_cache .pytest_cache
	find . -name __pycache__ -type d -not -path './.venv/*' -not -path './node_modules/*' -prune \
		-exec rm -rf {} +
