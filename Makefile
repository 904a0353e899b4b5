# The two commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
export PKG_CONFIG_PATH := $(CURDIR)/build/tf:$(PKG_CONFIG_PATH)
export LD_LIBRARY_PATH := $(CURDIR)/build/tf/lib:$(LD_LIBRARY_PATH)
# TensorFlow's informational log lines (oneDNN notices) drown test output.
export TF_CPP_MIN_LOG_LEVEL ?= 1

.PHONY: demo test setup lint rust-test rust-docs rust-user package-test py-test bench plugin wheel miri fuzz

demo:
	cargo run --release -q -p hogwild-cli -- demo

setup:
	@bash scripts/setup.sh

# Default members build without TensorFlow; the workspace (runner, plugin bridge) needs setup first.
lint: setup
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --features hogwild-cli/tf -- -D warnings

# The runner's tests load the op library, so the plugin is built first.
rust-test: setup plugin
	cargo test --workspace --all-targets --features hogwild-cli/tf
	cargo test --workspace --doc

py-test: setup plugin
	PYTHONPATH=$(CURDIR)/python .venv/bin/python -m pytest -q tests

test: setup lint rust-test rust-docs rust-user package-test miri py-test

# The libraries' documentation, every public item documented and every link resolved (the
# runner crate links TensorFlow, hence setup).
rust-docs: setup
	RUSTDOCFLAGS="-D warnings -W missing_docs" cargo doc --no-deps -p hogwild-train -p hogwild-tf \
		-p hogwild-tf-plugin

# A crate of a user's own outside the workspace (examples/rust-user, depending on crates/hogwild
# by path): a text classifier trained, saved, loaded and asked, and a model of its own, with the
# public API alone. Its lock file is the workspace's (the versions the project is tested with,
# whatever dependency the core gains), and target/ is shared so that nothing is built twice.
rust-user:
	cp Cargo.lock examples/rust-user/Cargo.lock
	out=$$(mktemp -d) && cd examples/rust-user && cargo fmt --check && \
	CARGO_TARGET_DIR=$(CURDIR)/target cargo run -q --bin text -- "$$out" && \
	CARGO_TARGET_DIR=$(CURDIR)/target cargo run -q --bin linear_regression -- "$$out" && \
	rm -rf "$$out"

# `cargo package` of each published crate, and its tests run from the package.
package-test:
	bash scripts/package_test.sh

bench:
	cargo bench -p hogwild-train

# The TensorFlow plugin (build/plugin/libadam_async_ops.so), rebuilt only when a source changed.
PLUGIN := build/plugin/libadam_async_ops.so
PLUGIN_SRC := $(shell find tf_plugin crates/hogwild -type f -not -path '*/target/*') \
	Cargo.toml Cargo.lock

plugin: $(PLUGIN)

$(PLUGIN): $(PLUGIN_SRC) | setup
	bash tf_plugin/build.sh

# The installable package: dist/adam_async-<version>+tf<TF>-py3-none-<platform>.whl with the op
# library inside, pinned to the TensorFlow it was built for (`pip install dist/*.whl`).
wheel: plugin
	bash scripts/build_wheel.sh dist

# Miri on the tests of the crate's shared mutable memory: the Hogwild store and the shared-memory
# AdamAsync kernels (optim::shared and, for half variables, optim::mixed: what the TF plugin runs
# without exclusive locks). Installs the nightly
# toolchain's miri when it is missing; says so loudly if that cannot be done on this machine.
miri:
	@cargo +nightly miri --version >/dev/null 2>&1 || \
		rustup component add miri rust-src --toolchain nightly >/dev/null 2>&1 || true
	@if cargo +nightly miri --version >/dev/null 2>&1; then \
		cargo +nightly miri test -p hogwild-train --lib store:: && \
		cargo +nightly miri test -p hogwild-train --lib optim::shared:: && \
		cargo +nightly miri test -p hogwild-train --lib optim::mixed::; \
	else \
		echo "miri: NOT RUN: no nightly toolchain with miri on this machine (rustup toolchain install nightly -c miri,rust-src)"; \
	fi

# Coverage-guided fuzzing of the MultiSlot line parser and the data.prototxt reader with cargo-fuzz
# (nightly; 30 s a target). `make test` runs the same targets without it: the Rust tests replay the
# corpus in crates/hogwild/tests/corpus and seeded mutations of it
# (crates/hogwild/tests/fuzz_corpus.rs), which needs no extra toolchain and takes seconds.
fuzz:
	bash scripts/fuzz.sh 30
