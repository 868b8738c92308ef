# ttl-sweeper — build, test, demo and package.
#
#   make demo     watch the sweeper delete expired items from a local DynamoDB (installs what it needs)
#   make test     formatting, lints, unit, mock, integration and Lambda end-to-end tests
#   make package  the arm64 Lambda zip, built with cargo-lambda
#   make dist     every release file in dist/ at one version, with SHA256SUMS (docs/releasing.md)
#
# Set DYNAMODB_ENDPOINT=http://127.0.0.1:PORT to use a DynamoDB-API server you run yourself
# (dynalite, moto_server, ...) instead of the DynamoDB Local the Makefile starts.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV          := .venv
CARGO_LAMBDA  := $(CURDIR)/$(VENV)/bin/cargo-lambda
CARGO_LAMBDA_VERSION := 1.9.2
CFN_LINT_VERSION := 1.58.0
MOTO_VERSION  := 5.2.5
PYNAMODB_VERSION := 6.1.0
PYNAMODB      := $(CURDIR)/$(VENV)/.pynamodb-$(PYNAMODB_VERSION)
MOTO_SERVER   := $(CURDIR)/$(VENV)/bin/moto_server
PYTEST_VERSION := 9.2.0
KUBERNETES_VALIDATE_VERSION := 1.37.0
AWSCLI_VERSION := 1.46.3
AWSCLI        := $(CURDIR)/.tools/awscli/bin/aws
KUBERNETES_VALIDATE := $(CURDIR)/$(VENV)/.kubernetes-validate-$(KUBERNETES_VALIDATE_VERSION)
PYTEST        := $(CURDIR)/$(VENV)/.pytest-$(PYTEST_VERSION)
JEST_STAMP    := examples/local-testing/jest/node_modules/.installed
ZIGLANG_VERSION := 0.13.0
STATE         := target/dynamodb-local
MOTO_STATE    := target/moto
# Section 6's baseline: batch mode before its confirming read.
BASELINE_COMMIT ?= 75ffdf9

LOCAL_AWS_ENV := AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
                 AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# ---------------------------------------------------------------- tools

.PHONY: tools
tools: dynamodb-local faketime $(CARGO_LAMBDA) $(MOTO_SERVER) $(PYNAMODB) $(KUBERNETES_VALIDATE) $(AWSCLI) local-testing-tools ## install DynamoDB Local (+ Java 17), libfaketime, cargo-lambda, moto, PynamoDB, kubernetes-validate, the AWS CLI, and Jest and pytest for docs/local-testing.md

# libfaketime (Debian package `faketime`) for the wrong-clock test, tests/clock_skew.rs.
.PHONY: faketime
faketime:
	@command -v faketime >/dev/null || { \
	  echo "installing faketime (Debian package) for tests/clock_skew.rs"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq faketime >/dev/null; }

.PHONY: dynamodb-local
dynamodb-local:
	@if [ -z "$${DYNAMODB_ENDPOINT:-}" ]; then scripts/dynamodb-local.sh install; fi

$(CARGO_LAMBDA):
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "cargo-lambda==$(CARGO_LAMBDA_VERSION)"

# moto's server mode: local SQS, EventBridge, Firehose and S3 for the expiry-event tests and the
# demo (scripts/moto.sh starts it on 127.0.0.1, tests/support/moto.rs from the tests).
$(MOTO_SERVER): | $(CARGO_LAMBDA)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "moto[server]==$(MOTO_VERSION)"

# infra/container/kubernetes.yaml's check against Kubernetes' schemas (tests/container.rs; the ECS
# task definition is checked with botocore, which moto brings).
$(KUBERNETES_VALIDATE): | $(MOTO_SERVER)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION)"
	touch $@

# The AWS CLI (v1, from PyPI) for the README's lines that use it (tests/adoption.rs), in a
# virtual environment of its own: it pins a botocore of its own.
$(AWSCLI):
	python3 -m venv .tools/awscli
	.tools/awscli/bin/pip install --quiet --disable-pip-version-check "awscli==$(AWSCLI_VERSION)"

# docs/local-testing.md's fixtures, run by tests/local_testing.rs: pytest (boto3 comes with moto)
# and Jest with the AWS SDK for JavaScript, as pinned in the example's package-lock.json.
$(PYTEST): | $(MOTO_SERVER)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "pytest==$(PYTEST_VERSION)"
	touch $@

$(JEST_STAMP): examples/local-testing/jest/package.json examples/local-testing/jest/package-lock.json
	cd examples/local-testing/jest && npm ci --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: local-testing-tools
local-testing-tools: $(PYTEST) $(JEST_STAMP)

.PHONY: local-testing
local-testing: dynamodb-local local-testing-tools ## docs/local-testing.md's fixtures (Rust, Jest, pytest) against DynamoDB Local, each suite's time printed
	$(LOCAL_AWS_ENV) cargo test --test suite -- local_testing:: --nocapture --test-threads 1 2>&1 \
	  | grep -oE 'local testing: .*|test result: .*'

# PynamoDB, a Python ORM: tests/fixtures/orm_writer.py, an application that knows nothing of the
# sweeper (tests/stream_follow.rs).
$(PYNAMODB): | $(CARGO_LAMBDA)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "pynamodb==$(PYNAMODB_VERSION)"
	touch $@

.PHONY: zig
zig: $(CARGO_LAMBDA)
	@$(VENV)/bin/python -c 'import ziglang' 2>/dev/null || \
	  $(VENV)/bin/pip install --quiet --disable-pip-version-check "ziglang==$(ZIGLANG_VERSION)"

# ---------------------------------------------------------------- build

.PHONY: build
build: ## debug build of the CLI and the Lambda
	cargo build --bins

# ---------------------------------------------------------------- test

.PHONY: fmt
fmt: ## format the code
	cargo fmt

.PHONY: lint
lint: ## rustfmt check and clippy -D warnings
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

.PHONY: test
test: ## everything CI runs: rustfmt, clippy, Rust tests (unit, mock, integration, Lambda e2e), infra tests (construct, SAM, Terraform), helper packages
	@# The Rust build and the installs and infra tests need different things (the CPU, the network,
	@# Node.js): they run side by side, each target's output shown when it ends. The Rust tests run
	@# after, so that no test shares the machine with the build; beside them, on the CPU they leave
	@# idle (they mostly wait on servers and deadlines), only the construct's package checks, at the
	@# lowest priority (nice 19).
	@echo "make test: started at $$(date +%T); building the Rust tests beside the installs and the infra tests; each part prints its output when it ends"
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-build tools test-infra-checks test-terraform
	@$(MAKE) --no-print-directory -j2 --output-sync=target -o test-build -o tools test-rust test-infra-packages NICE="nice -n 19"  # -o: built above, not again
	@$(MAKE) --no-print-directory test-packages
	@echo "make test: done at $$(date +%T)"

# The tests are built by clippy's driver with warnings denied (scripts/clippy-rustc): one build is
# both `cargo clippy --all-targets -- -D warnings` and the test build.
CLIPPY_BUILD := RUSTC_WORKSPACE_WRAPPER=$(CURDIR)/scripts/clippy-rustc
TEST_TARGETS := --lib --bins --tests --examples

.PHONY: test-build
test-build: ## rustfmt check; the tests and the benchmark built with clippy's lints (warnings denied); the crate without default features checked; the doc tests
	cargo fmt --check
	$(CLIPPY_BUILD) cargo test --no-run $(TEST_TARGETS) --benches  # the benchmark compiles; `make bench` runs it
	cargo check --no-default-features --lib  # again in test-packages, then with nothing left to do
	$(CLIPPY_BUILD) cargo test --doc  # pure examples: here, while the machine is busy anyway
	@echo "test-build: done at $$(date +%T)"

.PHONY: test-rust
test-rust: tools test-build
	$(CLIPPY_BUILD) CARGO_LAMBDA=$(CARGO_LAMBDA) $(LOCAL_AWS_ENV) scripts/run-tests.sh $(TEST_TARGETS)
	@echo; echo "Fault injection (tests/faults.rs):"; cat target/tmp/fault-report.md target/tmp/chaos-report.md
	@echo; cat target/tmp/events-fault-report.md

# ---------------------------------------------------------------- soak

# Not part of `make test`: minutes of faults, SIGKILLs and racing writers against the real
# binaries (tests/soak.rs, docs/reliability.md). SOAK_SEED=<n> repeats a run; SOAK_SCALE=0.3 is
# a shorter one.
.PHONY: soak
soak: dynamodb-local $(MOTO_SERVER) ## faults, SIGKILLs and racing writers for minutes, then the safety invariants (SOAK_SEED, SOAK_SCALE)
	$(LOCAL_AWS_ENV) cargo test --test suite -- --ignored --nocapture soak::

# The helper library alone (no default features) compiles; tests/release.rs checks its dependency
# tree. The ttl-sweeper-expiry packages for npm and PyPI against the spec/ vectors.
.PHONY: test-packages
test-packages: ## the crate without default features, the ttl-sweeper-expiry packages (npm, PyPI)
	cargo check --no-default-features --lib
	cd packages/expiry-js && node --test test/
	cd packages/expiry-py && python3 -m unittest discover -s tests -t .

# ---------------------------------------------------------------- infra (AWS CDK construct library, jsii)

INFRA_STAMP  := infra/node_modules/.installed
INFRA_JSII   := infra/.jsii
INFRA_PYTHON := infra/dist/python/.built
INFRA_SRC    := $(wildcard infra/src/*.ts) infra/package.json infra/tsconfig.json infra/README.md
# jsii prints a banner on every run when Node.js 20 is past its end of life; the build works on it.
# The CDK CLI neither sends telemetry nor checks for updates; telemetry and notices are also off in
# infra/cdk.json.
INFRA_ENV    := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true

$(INFRA_STAMP): infra/package.json infra/package-lock.json
	cd infra && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# tests/stream_snippets.rs compiles the TypeScript snippet of docs/events.md with infra's tsc.
test-rust: $(INFRA_STAMP)

$(INFRA_JSII): $(INFRA_STAMP) $(INFRA_SRC)
	cd infra && $(INFRA_ENV) npx jsii --fail-on-warnings

.PHONY: infra-build
infra-build: $(INFRA_JSII) ## the CDK construct library: infra/lib (JavaScript + declarations) and its jsii assembly

# A build check: jsii-pacmak packs the npm package first, here without the Lambda zip (the npm
# prepack refuses that unless told, infra/scripts/prepack.js), so apps of this wheel pass `code`.
# The wheel that carries the Lambda is make dist's.
$(INFRA_PYTHON): $(INFRA_JSII) infra/.npmignore
	rm -rf infra/dist/python
	cd infra && $(INFRA_ENV) TTL_SWEEPER_PACK_WITHOUT_LAMBDA=1 npx jsii-pacmak --targets python
	ls infra/dist/python/ttl_sweeper_cdk-*-py3-none-any.whl infra/dist/python/ttl_sweeper_cdk-*.tar.gz >/dev/null
	touch $@

.PHONY: infra-python
infra-python: $(INFRA_PYTHON) ## the construct's Python package (jsii-pacmak), without the Lambda (make dist's carries it): wheel and sdist in infra/dist/python
	@ls -l infra/dist/python/

# After moto: one pip at a time in the venv.
$(VENV)/bin/cfn-lint: $(CARGO_LAMBDA) | $(MOTO_SERVER)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "cfn-lint==$(CFN_LINT_VERSION)"

.PHONY: test-infra
test-infra: test-infra-checks test-infra-packages ## construct build, type-check, template/IAM/validation/SAM tests, cdk-nag, cfn-lint, package test, lowest aws-cdk-lib, Python build

.PHONY: test-infra-checks
test-infra-checks: $(INFRA_JSII) $(VENV)/bin/cfn-lint ## the construct built, type-checked, its tests (template, IAM, validation, SAM, cdk-nag) and cfn-lint
	cd infra && npx tsc -p tsconfig.dev.json
	cd infra && npm test
	cd infra && $(INFRA_ENV) CFN_LINT=$(CURDIR)/$(VENV)/bin/cfn-lint scripts/lint-template.sh
	@echo "test-infra-checks: done at $$(date +%T)"

# $(NICE): `make test` runs these beside the Rust tests, on the CPU those leave idle (they mostly
# wait), at the lowest priority so that no timing of a Rust test shares the CPU with them.
.PHONY: test-infra-packages
test-infra-packages: $(INFRA_JSII) $(VENV)/bin/cfn-lint ## the construct as users get it: the npm package installed into an app, the tests on the lowest aws-cdk-lib, the Python build
	cd infra && $(INFRA_ENV) CFN_LINT=$(CURDIR)/$(VENV)/bin/cfn-lint $(NICE) scripts/package-test.sh
	cd infra && $(INFRA_ENV) $(NICE) scripts/peer-test.sh  # the tests again on the lowest aws-cdk-lib of peerDependencies
	$(NICE) $(MAKE) --no-print-directory infra-python
	@echo "test-infra-packages: done at $$(date +%T)"

# ---------------------------------------------------------------- infra: the Terraform module

# infra/terraform, checked offline: there is no provider registry here, so terraform init,
# validate and plan cannot run (infra/terraform/README.md says what is checked instead). checkov
# pins its own HCL parser (bc-python-hcl2, whose module is also `hcl2`) and dozens of libraries:
# it gets a venv of its own, as do the tests' python-hcl2, inside the git-ignored .venv.
CHECKOV_VERSION     := 3.3.30
PYTHON_HCL2_VERSION := 8.1.4
CHECKOV             := $(CURDIR)/$(VENV)/checkov/bin/checkov
TF_TEST_PYTHON      := $(CURDIR)/$(VENV)/terraform-tests/bin/python
TF_TEST_STAMP       := $(VENV)/terraform-tests/.python-hcl2-$(PYTHON_HCL2_VERSION)
# No ~/.terraformrc needed, no update check; checkov neither downloads nor reports anything.
TERRAFORM_ENV       := TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1
CHECKOV_ENV         := BC_SKIP_MAPPING=TRUE CHECKOV_NO_OUTPUT_COLOR=1

$(CHECKOV):
	python3 -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install --quiet --disable-pip-version-check "checkov==$(CHECKOV_VERSION)"

$(TF_TEST_STAMP):
	python3 -m venv $(VENV)/terraform-tests
	$(VENV)/terraform-tests/bin/pip install --quiet --disable-pip-version-check "python-hcl2==$(PYTHON_HCL2_VERSION)"
	touch $@

.PHONY: test-terraform
test-terraform: $(INFRA_STAMP) $(TF_TEST_STAMP) $(CHECKOV) ## the Terraform module: terraform fmt -check, structure tests (python-hcl2), checkov, drift test against the construct
	@command -v terraform >/dev/null || { echo "test-terraform: no terraform on PATH; terraform fmt -check needs Terraform 1.9 or later (1.11 on CI)" >&2; exit 1; }
	$(TERRAFORM_ENV) terraform fmt -check -recursive -diff infra/terraform
	cd infra/terraform/test && $(TF_TEST_PYTHON) -m unittest test_structure test_drift test_settings
	$(CHECKOV_ENV) $(CHECKOV) --directory infra/terraform --framework terraform --quiet --compact --skip-download --download-external-modules false
	@echo "test-terraform: done at $$(date +%T)"

.PHONY: synth
synth: $(INFRA_STAMP) package ## cdk synth the example app offline (infra/cdk.out), no credentials needed
	cd infra && $(INFRA_ENV) npx cdk synth --quiet

.PHONY: deploy
deploy: $(INFRA_STAMP) package ## cdk deploy the example app (AWS credentials; CDK_ARGS="-c tableName=<your table>" for an existing one)
	cd infra && $(INFRA_ENV) npx cdk deploy $(CDK_ARGS)

# ---------------------------------------------------------------- demo

.PHONY: demo
demo: dynamodb-local $(MOTO_SERVER) ## watch expired items disappear from a local DynamoDB table, and their expiry events arrive in SQS
	cargo build --example demo
	@trap 'scripts/moto.sh stop $(MOTO_STATE)' EXIT; \
	scripts/moto.sh start $(MOTO_STATE); \
	export AWS_ENDPOINT_URL_SQS="$$(cat $(MOTO_STATE)/endpoint)"; \
	if [ -n "$${DYNAMODB_ENDPOINT:-}" ]; then \
	  $(LOCAL_AWS_ENV) AWS_ENDPOINT_URL="$$DYNAMODB_ENDPOINT" target/debug/examples/demo; \
	else \
	  trap 'scripts/dynamodb-local.sh stop $(STATE); scripts/moto.sh stop $(MOTO_STATE)' EXIT; \
	  scripts/dynamodb-local.sh start $(STATE); \
	  $(LOCAL_AWS_ENV) AWS_ENDPOINT_URL="$$(cat $(STATE)/endpoint)" target/debug/examples/demo; \
	fi

# ---------------------------------------------------------------- bench

.PHONY: bench
bench: dynamodb-local ## benchmarks: lag, throughput, CPU, start-up, cost (BENCH_QUICK=1 for a quick check)
	cargo build --release --bin ttl-sweeper-lambda --bin ttl-sweeper
	@# Section 6 measures batch mode beside the build of BASELINE_COMMIT (scripts/baseline.sh),
	@# in full runs and in BENCH_ONLY=outside or perf; BENCH_BASELINE_SWEEPER=<binary> overrides.
	baseline="$${BENCH_BASELINE_SWEEPER:-}"; \
	case "$${BENCH_QUICK:-}/$${BENCH_ONLY:-}" in \
	  /|*/outside|*/perf) [ -n "$$baseline" ] || [ "$${BENCH_QUICK:-}" = 1 ] || baseline=$$(scripts/baseline.sh $(BASELINE_COMMIT)) ;; \
	esac; \
	BENCH_BASELINE_SWEEPER="$$baseline" BENCH_BASELINE_COMMIT=$${baseline:+$(BASELINE_COMMIT)} $(LOCAL_AWS_ENV) cargo bench --bench sweeper

# perf (Debian `linux-perf`) samples the CPU of one sweep against the benchmark's fake endpoint.
.PHONY: perf
perf:
	@command -v perf >/dev/null || { \
	  echo "installing linux-perf (Debian package) for make profile"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq linux-perf >/dev/null; }

.PHONY: profile
profile: perf ## CPU profile (with symbols) of one sweep against the fake DynamoDB endpoint (BASELINE=<older build> beside it); PROFILE_DELAY=5-10 answers after 5-10 ms
	cargo build --profile profiling --bin ttl-sweeper
	cargo bench --bench sweeper --no-run
	scripts/profile.sh

# ---------------------------------------------------------------- the settings spec

.PHONY: settings-spec
settings-spec: ## write infra/settings.json (every setting's rule, default and words) from src/config/settings.rs
	cargo run --quiet --bin ttl-sweeper -- settings > infra/settings.json.tmp && mv infra/settings.json.tmp infra/settings.json
	@echo "settings-spec: wrote infra/settings.json"

# ---------------------------------------------------------------- package

.PHONY: package
package: zig ## the arm64 Lambda: target/lambda/ttl-sweeper-lambda/bootstrap and target/lambda/ttl-sweeper-lambda.zip
	rustup target list --installed | grep -q aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(CARGO_LAMBDA) lambda build --release --arm64 --bin ttl-sweeper-lambda
	cd target/lambda/ttl-sweeper-lambda && rm -f ../ttl-sweeper-lambda.zip && python3 -m zipfile -c ../ttl-sweeper-lambda.zip bootstrap
	@ls -l target/lambda/ttl-sweeper-lambda/bootstrap target/lambda/ttl-sweeper-lambda.zip

# ---------------------------------------------------------------- release

# Cross-builds the Lambda and the CLI for arm64 and x86_64 (release, cargo-lambda + zig: minutes
# each), so it is not part of `make test`. docs/releasing.md says what it writes and how to release.
.PHONY: dist
dist: zig $(INFRA_STAMP) ## release files in dist/ (Lambda zips, CLI archives, construct, crate, helpers, SHA256SUMS), then dist-test
	scripts/dist.sh
	$(MAKE) --no-print-directory dist-test

# aws-cdk-lib for the Python app: PyPI's newest is 2.275.0 (checked 2026-11-23), npm's pin 2.276.0.
# The wheel asks for the peer range of infra/package.json (>=2.257.0), which 2.275.0 meets; pip
# installs the wheel with its dependencies, so a version outside that range is refused.
PY_AWS_CDK_LIB ?= 2.275.0

.PHONY: dist-test
dist-test: ## the construct from dist/ in fresh npm and Python apps outside the checkout: synth without code, AArch64 bootstrap
	PY_AWS_CDK_LIB=$(PY_AWS_CDK_LIB) scripts/dist-test.sh

# Not part of `make test` either: README's install commands as written (make dist among them,
# then npm install of its tarball into a new app outside the checkout), then the quick start's
# app synthesized there without `code` (scripts/install-test.sh).
.PHONY: install-test
install-test: ## the README's install commands as written (make dist included), then its quick-start app synthesized outside the checkout
	scripts/install-test.sh

# ---------------------------------------------------------------- container image

.PHONY: image
image: dynamodb-local $(MOTO_SERVER) ## the daemon's container image (static binary on scratch, non-root) as OCI archives in dist/, built with umoci and checked (scripts/image-test.sh); no container engine needed
	scripts/image.sh

.PHONY: image-test
image-test: dynamodb-local $(MOTO_SERVER) ## check the images in dist/ again: config, files, the binary run from them
	scripts/image-test.sh

.PHONY: clean
clean:
	cargo clean
