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

.PHONY: captures captures-hf captures-seeds captures-unseen torch-tool run test gates rust-parts tools trunk-tool wasm-bindgen-tool wasm-opt-tool browser s3-emulator app app-build server debug-bin wasm-test bench bench-scale bench-ui soak clean fuzz fuzz-smoke fuzz-build fuzz-runs fuzz-tools fuzz-seeds api-fuzz api-fuzz-tools

## Build the app and the server, start one process serving both (embedded SQLite, blobs, worker).
## The server is built with the `serve` profile (Cargo.toml): a third of the
## release build's time, the analysis as fast. Two builds at a time, sharing
## two job slots (GNU make's jobserver, which cargo and rustc join: the `+`
## on their lines): the server's build fills the cores that Trunk's and the
## app's one-thread stretches (a long crate, the app's LTO) leave idle, and
## never more than two compilers run. Each build has its own target
## directory (cargo locks one per build). BENCHMARKS.md, "Setup and CI".
run:
	+$(MAKE) -j2 app server
	./target/serve/kinetoscope serve

## Everything the CI checks: Rust tests (SQLite and PostgreSQL), WASM tests in headless
## Chromium, and the browser end-to-end tests against the built app. The gates
## (formatting first, then lints) run before any long build, so a red result
## comes early; the gates' clippy --all-targets also compiles the benches, so
## they are not checked again. The app's pure logic is its own crate
## (kinetoscope-view), tested by `cargo test` with no host build of Leptos.
## After the gates, work that does not depend on each other runs two at a time
## on the jobserver's two slots (`-O`: each one's output printed whole when it
## ends): the app beside the tests' build, the WASM tests beside the fuzz
## build, the fuzz runs (one core each) beside the API fuzzing. The host tests
## run alone: their timeouts assume the cores are theirs. Beside the API
## fuzzing a target runs 0.64-0.95x as many inputs a second as alone (the
## analyze target least), so each fuzzes 22 s instead of the smoke's 15:
## no fewer inputs than alone (BENCHMARKS.md, "Setup and CI").
test: gates tools
	+$(MAKE) -j2 -O app-build debug-bin browser s3-emulator fuzz-tools api-fuzz-tools
	cargo test --locked
	$(MAKE) fuzz-seeds
	+$(MAKE) -j2 -O wasm-test fuzz-build
	+$(MAKE) -j2 -O fuzz-runs api-fuzz FUZZ_SECONDS=22

## The app's tests in headless Chromium (wasm-bindgen-test-runner).
wasm-test:
	+CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
	  cargo test -p app --target wasm32-unknown-unknown --test web --locked

## The benchmarks: parse speed and memory on the generated 480 MB trace, and the
## service under 20 concurrent uploads and 200 concurrent readers (see BENCHMARKS.md).
bench:
	cargo bench -p kinetoscope-trace --bench analyze
	cargo bench -p kinetoscope-trace --bench analyze -- --categories
	cargo bench -p server --bench load

## The same model at 30, 120 and 300 steps (300: 4.9 GB of JSON, 14 M events;
## generated once into target/bench, about 700 MB of zstd): time and peak RSS.
bench-scale:
	cargo bench -p kinetoscope-trace --bench analyze -- --scale

## The gates: formatting, lints (host crates and the app on wasm32, warnings
## denied, missing docs included), the pure core's dependency tree, and the
## generator's (the oracle shares no code with what it checks).
gates: rust-parts
	cargo fmt --all --check
	cargo clippy --all-targets --locked -- -D warnings
	cargo clippy -p app --target wasm32-unknown-unknown --all-targets --locked -- -D warnings
	@if cargo tree -p kinetoscope-trace -e normal --prefix none --locked | grep -E '^(sqlx|tokio|object_store|reqwest|axum|hyper) '; then \
	  echo "kinetoscope-trace must not depend on the service crates above"; exit 1; fi
	@if cargo tree -p kinetoscope-generate -e normal --prefix none --locked | grep -E '^kinetoscope-trace '; then \
	  echo "kinetoscope-generate is the tests' oracle: it must not use the parser or analysis it checks"; exit 1; fi

## The soak (RELIABILITY.md): SOAK_MINUTES of uploads, 100 readers, a worker
## killed every minute, the disk filled once; checks that nothing is lost.
SOAK_MINUTES ?= 10
soak:
	SOAK_MINUTES=$(SOAK_MINUTES) cargo bench -p server --bench soak

## Time the run page in the browser on the summary of the generated 490 MB trace.
bench-ui: tools browser app
	KINETOSCOPE_UI_BENCH=1 cargo test --release -p server --test e2e_browser -- --nocapture --test-threads 1 timing

## Remakes the real-capture family the tests check the analysis against
## (worker/trace/tests/captures/: traces, torch's key_averages, the models'
## truth) with torch on this machine: python/captures/capture.py, CPU modes
## always, the GPU modes (CUDA graphs) where torch sees a GPU. Torch goes
## into a virtualenv under TOOLS_DIR once (about 4 GB with its CUDA
## libraries, a minute here); CI never needs it. CAPTURE_SEED picks the family.
CAPTURE_SEED ?= 41
CAPTURE_OUT ?= worker/trace/tests/captures
## The other seeds the tests hold (tests/captures/seed7/, seed23/).
captures-seeds:
	$(MAKE) captures CAPTURE_SEED=7 CAPTURE_OUT=worker/trace/tests/captures/seed7
	$(MAKE) captures CAPTURE_SEED=23 CAPTURE_OUT=worker/trace/tests/captures/seed23
torch-tool:
	@if ! $(TOOLS_DIR)/torch/bin/python -c 'import torch' 2>/dev/null; then \
	  echo "installing torch in $(TOOLS_DIR)/torch (once)"; \
	  python3 -m venv $(TOOLS_DIR)/torch && $(TOOLS_DIR)/torch/bin/pip install -q torch numpy; fi
## A draw of the family the rules were not written against, checked and not
## kept: captures seed UNSEEN_SEED (a new one each second by default) into
## target/captures-unseen/ and runs the family's checks on it
## (`captures::an_unseen_draw_holds`, ignored in `make test`: CI has no torch).
UNSEEN_SEED ?= $(shell date +%s)
captures-unseen: torch-tool
	$(TOOLS_DIR)/torch/bin/python python/captures/capture.py --seed $(UNSEEN_SEED) \
	  --out target/captures-unseen/seed$(UNSEEN_SEED)
	KINETOSCOPE_UNSEEN_CAPTURES=$(CURDIR)/target/captures-unseen/seed$(UNSEEN_SEED) \
	  cargo test --release -p kinetoscope-trace --test it -- --ignored --nocapture an_unseen_draw_holds
captures: torch-tool
	$(TOOLS_DIR)/torch/bin/python python/captures/capture.py --seed $(CAPTURE_SEED) \
	  --out $(CAPTURE_OUT) $$($(TOOLS_DIR)/torch/bin/python -c 'import torch; print("--gpu" if torch.cuda.is_available() else "")')
	$(TOOLS_DIR)/torch/bin/python python/captures/recompile.py --out worker/trace/tests/captures/compiling
	$(TOOLS_DIR)/torch/bin/python python/captures/unmarked.py --out worker/trace/tests/captures/unmarked
## Hugging Face transformers models and diffusers pipelines profiled on the
## CPU (other people's model code; `captures::hugging_face_models_hold`
## checks them).
captures-hf: torch-tool
	$(TOOLS_DIR)/torch/bin/python -c 'import transformers, diffusers' 2>/dev/null || \
	  $(TOOLS_DIR)/torch/bin/pip install -q transformers diffusers
	$(TOOLS_DIR)/torch/bin/python python/captures/hf.py --out worker/trace/tests/captures/hf
	$(TOOLS_DIR)/torch/bin/python python/captures/diffusion.py --out worker/trace/tests/captures/hf

## Coverage-guided fuzzing of the pure core (cargo-fuzz, libFuzzer, AddressSanitizer):
## every target for FUZZ_SECONDS each (`make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS=parse`,
## FUZZ_ARGS for more libFuzzer flags).
## New inputs are kept in target/fuzz-corpus/; crashes land in worker/trace/fuzz/artifacts/.
FUZZ_TARGETS ?= parse decode analyze summaries timeline
FUZZ_SECONDS ?= 60
FUZZ_ARGS ?=
# Any input that takes longer than this (seconds) is a find: a small upload
# must never stall the worker (RELIABILITY.md, the overlapping kernels).
FUZZ_TIMEOUT ?= 10
CARGO_FUZZ_VERSION := 0.13.2
SHARED_TRACES ?= $(CURDIR)/../shared/traces
# cargo-fuzz builds with -Zsanitizer=address: RUSTC_BOOTSTRAP lets the
# machine's one (stable) toolchain accept it. decode runs without leak
# detection: its decompression thread's TLS list is sometimes still being
# freed when the scope has joined it (a race in the check; RELIABILITY.md).
FUZZ := cd worker/trace && RUSTC_BOOTSTRAP=1 cargo fuzz
fuzz: fuzz-seeds
	+$(MAKE) fuzz-build
	+$(MAKE) fuzz-runs

## Every target in one build: their binaries compile and link side by side.
fuzz-build:
	+$(FUZZ) build

## Each target in turn, on the seeds and corpus (after fuzz-seeds and fuzz-build).
fuzz-runs:
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p target/fuzz-corpus/$$t; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  ( $(FUZZ) run $$t $(CURDIR)/target/fuzz-corpus/$$t $(CURDIR)/target/fuzz-seeds/$$t -- \
	      -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -rss_limit_mb=2048 -timeout=$(FUZZ_TIMEOUT) \
	      $$( [ $$t = decode ] && echo -detect_leaks=0 ) $(FUZZ_ARGS) ) || exit 1; \
	done

## What `make test` runs, in its steps: every target builds, replays its seeds
## and the crash regressions, then fuzzes briefly.
fuzz-smoke: FUZZ_SECONDS = 15
fuzz-smoke: fuzz

fuzz-tools:
	+@if ! cargo fuzz --version 2>/dev/null | grep -q "$(CARGO_FUZZ_VERSION)"; then \
	  echo "installing cargo-fuzz $(CARGO_FUZZ_VERSION) (a minute or two, once)"; \
	  cargo install cargo-fuzz --version $(CARGO_FUZZ_VERSION) --locked; fi

## API fuzzing: schemathesis against the running server's OpenAPI document,
## every operation and the links between them (`make api-fuzz API_FUZZ_SECONDS=600
## API_FUZZ_SEED=$$RANDOM` for a longer, different run; `make test` runs 90 s, seed 1).
SCHEMATHESIS_VERSION := 4.32.5
API_FUZZ_SECONDS ?= 90
API_FUZZ_SEED ?= 1
api-fuzz: api-fuzz-tools debug-bin
	server/tests/api_fuzz.sh target/debug/kinetoscope $(TOOLS_DIR)/schemathesis/bin/st $(API_FUZZ_SECONDS) $(API_FUZZ_SEED)

api-fuzz-tools:
	+@if ! $(TOOLS_DIR)/schemathesis/bin/st --version 2>/dev/null | grep -q "$(SCHEMATHESIS_VERSION)"; then \
	  echo "installing schemathesis $(SCHEMATHESIS_VERSION) (API fuzzing) in a virtualenv"; \
	  python3 -m venv $(TOOLS_DIR)/schemathesis && \
	  $(TOOLS_DIR)/schemathesis/bin/pip install -q "schemathesis==$(SCHEMATHESIS_VERSION)"; fi

## Seeds cut from the shared traces (never committed), and summaries of them.
fuzz-seeds: fuzz-tools debug-bin
	rm -rf target/fuzz-seeds
	python3 worker/trace/fuzz/seeds.py $(SHARED_TRACES) target/fuzz-seeds target/debug/kinetoscope
	@for t in $(FUZZ_TARGETS); do if [ -d worker/trace/fuzz/regressions/$$t ]; then \
	  cp worker/trace/fuzz/regressions/$$t/* target/fuzz-seeds/$$t/; fi; done

## The debug `kinetoscope` the integration tests run: built as `cargo test`
## builds it (the workspace's features, dev-dependencies included), so after
## `cargo test` this builds nothing; `cargo build -p server` would build the
## server again with other features.
debug-bin:
	+cargo test --locked --no-run

## The app, in its own target directory: cargo locks a target directory for
## the whole of a build, so the app could not build beside the server or the
## tests in ./target (and shares no compiled crate with them: wasm32).
APP_BUILD = CARGO_TARGET_DIR=$(CURDIR)/target/app trunk build --release
app: tools
	+$(APP_BUILD)

## The app's build alone, for `make test` once the tools are in place: there
## it must start before the tests' build, whose cargo would otherwise take
## every job slot the tools' checks give back (a cargo blocked on the
## jobserver's pipe wins each token as it is returned), and the app would
## wait for the whole of that build.
app-build:
	+$(APP_BUILD)

server:
	+cargo build --profile serve -p server --locked

## Tools are built with a light profile (environment config overrides their
## manifests' profiles): no LTO, no debug info, many codegen units, opt-level 0,
## since all Trunk does for us is run cargo, wasm-bindgen and wasm-opt (as fast
## either way, and it builds in 2.5 minutes instead of 4.5). wasm-bindgen-cli
## rewrites the app's WASM on every build, so the crates that do that work
## (WASM_BINDGEN_HOT) are at opt-level 1: it builds in 1 min 16 s instead of
## 1 min 40 s with the whole tool at opt-level 1, and rewrites the app's WASM
## in 0.35-0.40 s (0.26 s at opt-level 1, 1.06 s at 0: BENCHMARKS.md, "Setup
## and CI", 2026-12-04 and 2026-12-03 night). Both without their default features:
## no TLS stack (rustls and ring) and no crates.io update check; Trunk finds
## every tool it runs on PATH and downloads nothing, and the WASM test runner
## talks plain HTTP to the local chromedriver. One target directory for both,
## so what they share (serde, clap, syn and the other proc-macros) is built
## once, and kept (about 1 GB) so a new version rebuilds only what changed.
## One at a time, then: cargo locks the target directory for a whole build.
tool_profile = CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=false \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=64 CARGO_PROFILE_RELEASE_DEBUG=false \
  CARGO_PROFILE_RELEASE_INCREMENTAL=false CARGO_TARGET_DIR=$(TOOLS_DIR)/target
WASM_BINDGEN_HOT := wasm-bindgen-cli-support walrus wasmparser wasm-encoder leb128 leb128fmt \
  id-arena wasm-bindgen-shared gimli

## The toolchain's parts: rustfmt, clippy, the wasm32 target.
rust-parts:
	@for c in rustfmt clippy; do if ! rustup component list --installed | grep -q "^$$c"; then \
	  echo "installing the $$c component"; rustup component add $$c; fi; done
	@if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then \
	  echo "installing the wasm32-unknown-unknown target"; rustup target add wasm32-unknown-unknown; fi

## Installs the toolchain's parts, Trunk, wasm-bindgen-cli and wasm-opt when missing.
tools: rust-parts trunk-tool wasm-bindgen-tool wasm-opt-tool

trunk-tool:
	+@if ! trunk --version 2>/dev/null | grep -q "$(TRUNK_VERSION)"; then \
	  echo "installing trunk $(TRUNK_VERSION) (a few minutes, once)"; \
	  $(tool_profile) cargo install trunk --version $(TRUNK_VERSION) --locked --no-default-features; fi

# After Trunk: the same target directory.
wasm-bindgen-tool: trunk-tool
	+@if ! wasm-bindgen --version 2>/dev/null | grep -q "$(WASM_BINDGEN_VERSION)"; then \
	  echo "installing wasm-bindgen-cli $(WASM_BINDGEN_VERSION) (a minute or two, once)"; \
	  $(tool_profile) cargo install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) --force --no-default-features \
	    $(foreach c,$(WASM_BINDGEN_HOT),--config profile.release.package.$(c).opt-level=1); fi

wasm-opt-tool:
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
