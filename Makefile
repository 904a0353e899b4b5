# The two commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
export PKG_CONFIG_PATH := $(CURDIR)/build/tf:$(PKG_CONFIG_PATH)
export LD_LIBRARY_PATH := $(CURDIR)/build/tf/lib:$(LD_LIBRARY_PATH)

.PHONY: demo test setup lint rust-test py-test bench plugin

demo:
	cargo run --release -q -p hogwild-cli -- demo

setup:
	@bash scripts/setup.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy -p hogwild-tf-plugin --all-targets -- -D warnings

rust-test:
	cargo test --all-targets
	cargo test --doc
	cargo test -p hogwild-tf-plugin

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
