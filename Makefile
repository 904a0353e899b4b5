# The two commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
export PKG_CONFIG_PATH := $(CURDIR)/build/tf:$(PKG_CONFIG_PATH)
export LD_LIBRARY_PATH := $(CURDIR)/build/tf/lib:$(LD_LIBRARY_PATH)

.PHONY: demo test setup lint rust-test py-test bench fuzz

demo:
	cargo run --release -q -p hogwild-cli -- demo

setup:
	@bash scripts/setup.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings

rust-test:
	cargo test --all-targets
	cargo test --doc

py-test: setup
	.venv/bin/python -m pytest -q tests

test: setup lint rust-test py-test

bench:
	cargo bench -p hogwild

fuzz:
	bash scripts/fuzz.sh 30
