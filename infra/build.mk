# Lambda packaging for `sam build` (BuildMethod: makefile; see infra/DEPLOY.md).
#
# SAM runs `make build-<LogicalId>` with ARTIFACTS_DIR set; the root Makefile includes this
# file. The package is the runtime dependencies (infra/requirements.txt, generated from
# pyproject.toml) plus continuum/, handlers/ and samples/, and nothing else of the repository.
# Try it without SAM: make -f infra/build.mk build-WorkerFunction ARTIFACTS_DIR=/tmp/pkg

LAMBDA_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
# Including this file leaves the includer's default goal as it was.
LAMBDA_SAVED_GOAL := $(.DEFAULT_GOAL)
LAMBDA_SOURCES := continuum handlers samples
# The template's Runtime and Architectures; wheels are chosen for them, not for this machine.
LAMBDA_PYTHON_VERSION := 3.12
LAMBDA_PLATFORMS := manylinux2014_aarch64 manylinux_2_28_aarch64
LAMBDA_PIP ?= python3 -m pip
# /var/task is read-only, so a package without .pyc files compiles boto3, botocore and pydantic
# on every cold start. They are compiled with the runtime's Python where this machine has it
# (`sam build --use-container` always does); set LAMBDA_COMPILE_PYTHON= to skip.
LAMBDA_COMPILE_PYTHON ?= $(shell python$(LAMBDA_PYTHON_VERSION) -c 'import sys; print(sys.executable)' 2>/dev/null)

.PHONY: build-WorkerFunction build-DeadLetterFunction build-CallbackLinkFunction
build-WorkerFunction build-DeadLetterFunction build-CallbackLinkFunction:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set (sam build sets it)" >&2; exit 2; }
	mkdir -p "$(ARTIFACTS_DIR)"
	$(LAMBDA_PIP) install --disable-pip-version-check --quiet --no-compile --no-warn-conflicts \
		--target "$(ARTIFACTS_DIR)" --only-binary=:all: --implementation cp \
		--python-version $(LAMBDA_PYTHON_VERSION) $(LAMBDA_PLATFORMS:%=--platform %) \
		-r "$(LAMBDA_ROOT)/infra/requirements.txt"
	cd "$(LAMBDA_ROOT)" && cp -R $(LAMBDA_SOURCES) "$(ARTIFACTS_DIR)/"
	rm -rf "$(ARTIFACTS_DIR)/bin"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +
	$(if $(LAMBDA_COMPILE_PYTHON),$(LAMBDA_COMPILE_PYTHON) -m compileall -q -j 0 \
		--invalidation-mode unchecked-hash "$(ARTIFACTS_DIR)",\
		@echo "python$(LAMBDA_PYTHON_VERSION) not found: packaged without .pyc files")

.DEFAULT_GOAL := $(LAMBDA_SAVED_GOAL)
