# The two commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
export PKG_CONFIG_PATH := $(CURDIR)/build/tf:$(PKG_CONFIG_PATH)
export LD_LIBRARY_PATH := $(CURDIR)/build/tf/lib:$(LD_LIBRARY_PATH)
# TensorFlow's informational log lines (oneDNN notices) drown test output.
export TF_CPP_MIN_LOG_LEVEL ?= 1

.PHONY: demo test setup lint rust-test py-test bench plugin

demo:
	cargo run --release -q -p hogwild-cli -- demo

setup:
	@bash scripts/setup.sh

# Default members build without TensorFlow; the workspace (runner, plugin bridge) needs setup first.
lint: setup
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

rust-test: setup
	cargo test --workspace --all-targets
	cargo test --workspace --doc

py-test: setup plugin
	.venv/bin/python -m pytest -q tests

test: setup lint rust-test py-test

bench:
	cargo bench -p hogwild

# The TensorFlow plugin (build/plugin/libadam_async_ops.so), rebuilt only when a source changed.
PLUGIN := build/plugin/libadam_async_ops.so
PLUGIN_SRC := $(shell find tf_plugin crates/hogwild -type f -not -path '*/target/*') \
	Cargo.toml Cargo.lock

plugin: $(PLUGIN)

$(PLUGIN): $(PLUGIN_SRC) | setup
	bash tf_plugin/build.sh
