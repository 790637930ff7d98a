# Kinetoscope: two commands do all set-up.
#   make run   builds everything and starts the embedded server
#   make test  runs everything the CI checks
# Both install what is missing first (idempotent, quick when present).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

TOOLS_DIR ?= $(HOME)/.cache/kinetoscope
TRUNK_VERSION := 0.21.14
BINARYEN_VERSION := 132
# wasm-bindgen-cli must match the wasm-bindgen in Cargo.lock exactly, or
# Trunk tries to download one (and there is no GitHub from here).
WASM_BINDGEN_VERSION := $(shell awk '/^name = "wasm-bindgen"$$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)

# binaryen from npm comes first: Debian's binaryen 108 produces a blank page.
export PATH := $(TOOLS_DIR)/binaryen/node_modules/.bin:$(HOME)/.cargo/bin:$(PATH)
export CHROMEDRIVER ?= /usr/bin/chromedriver

.PHONY: run test gates tools browser s3-emulator app server bench bench-ui clean

## Build the app and the server, start one process serving both (embedded SQLite, blobs, worker).
run: tools app server
	./target/release/kinetoscope serve

## Everything the CI checks: Rust tests (SQLite and PostgreSQL), WASM tests in headless
## Chromium, and the browser end-to-end tests against the built app.
test: tools browser s3-emulator app gates
	cargo check --benches --locked
	cargo test --locked
	CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
	  cargo test -p app --target wasm32-unknown-unknown --locked

## The benchmarks: parse speed and memory on the generated 480 MB trace, and the
## service under 20 concurrent uploads and 200 concurrent readers (see BENCHMARKS.md).
bench:
	cargo bench -p kinetoscope-trace --bench analyze
	cargo bench -p server --bench load

## The gates: formatting, lints (host crates and the app on wasm32, warnings
## denied, missing docs included), and the pure core's dependency tree.
gates: tools
	cargo fmt --all --check
	cargo clippy --all-targets --locked -- -D warnings
	cargo clippy -p app --target wasm32-unknown-unknown --all-targets --locked -- -D warnings
	@if cargo tree -p kinetoscope-trace -e normal --prefix none --locked | grep -E '^(sqlx|tokio|object_store|reqwest|axum|hyper) '; then \
	  echo "kinetoscope-trace must not depend on the service crates above"; exit 1; fi

## Time the run page in the browser on the summary of the generated 490 MB trace.
bench-ui: tools browser app
	KINETOSCOPE_UI_BENCH=1 cargo test --release -p server --test e2e_browser -- --nocapture --test-threads 1 timing

app: tools
	trunk build --release

server:
	cargo build --release -p server --locked

## Installs the wasm target, Trunk, wasm-bindgen-cli and wasm-opt when missing.
tools:
	@for c in rustfmt clippy; do if ! rustup component list --installed | grep -q "^$$c"; then \
	  echo "installing the $$c component"; rustup component add $$c; fi; done
	@if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then \
	  echo "installing the wasm32-unknown-unknown target"; rustup target add wasm32-unknown-unknown; fi
	@if ! trunk --version 2>/dev/null | grep -q "$(TRUNK_VERSION)"; then \
	  echo "installing trunk $(TRUNK_VERSION) (a few minutes, once)"; \
	  cargo install trunk --version $(TRUNK_VERSION) --locked; fi
	@if ! wasm-bindgen --version 2>/dev/null | grep -q "$(WASM_BINDGEN_VERSION)"; then \
	  echo "installing wasm-bindgen-cli $(WASM_BINDGEN_VERSION) (a few minutes, once)"; \
	  cargo install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) --force; fi
	@if ! $(TOOLS_DIR)/binaryen/node_modules/.bin/wasm-opt --version 2>/dev/null | grep -q "version $(BINARYEN_VERSION)"; then \
	  echo "installing binaryen $(BINARYEN_VERSION) (wasm-opt) from npm"; \
	  mkdir -p $(TOOLS_DIR)/binaryen; \
	  npm install --prefix $(TOOLS_DIR)/binaryen --no-audit --no-fund --silent binaryen@$(BINARYEN_VERSION); fi

## Installs moto's S3 server (for the S3 storage test) in a virtualenv when missing.
MOTO_VERSION := 5.2.5
s3-emulator:
	@if ! $(TOOLS_DIR)/moto/bin/python -c 'import moto; print(moto.__version__)' 2>/dev/null | grep -qx "$(MOTO_VERSION)"; then \
	  echo "installing moto[server] $(MOTO_VERSION) (an S3 emulator for the tests)"; \
	  python3 -m venv $(TOOLS_DIR)/moto && \
	  $(TOOLS_DIR)/moto/bin/pip install -q "moto[server]==$(MOTO_VERSION)"; fi

## Installs Chromium and ChromeDriver (Debian packages) when missing.
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  echo "installing chromium and chromium-driver"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] && echo "" || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; fi

clean:
	cargo clean
	rm -rf app/dist
