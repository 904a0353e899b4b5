#!/usr/bin/env bash
# Bounded coverage-guided fuzzing of the data feed: the MultiSlot line parser and the data.prototxt
# reader (the targets' checks: crates/hogwild/tests/support/fuzz_targets.rs, which every
# `cargo test` also runs on the corpus and mutations of it).
# Usage: scripts/fuzz.sh [seconds per target, default 30]
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`); exits non-zero on the
# first crash, leaving the reproducer under fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECONDS_PER_TARGET="${1:-30}"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz with a nightly toolchain is required: rustup toolchain install nightly && cargo install cargo-fuzz" >&2
    exit 2
fi
for target in multislot_line desc_text; do
    echo "== fuzzing $target for ${SECONDS_PER_TARGET}s"
    # The checked-in seeds stay read-only; new corpus entries go to a scratch directory.
    work="$(mktemp -d)"
    log="$work.log"
    set +e
    cargo +nightly fuzz run -O "$target" "$work" "../crates/hogwild/tests/corpus/$target" -- \
        -max_total_time="$SECONDS_PER_TARGET" -max_len=4096 -timeout=10 -print_final_stats=1 \
        >"$log" 2>&1
    status=$?
    set -e
    grep -E "^(#[0-9]+ +DONE|Done [0-9]+ runs|stat::number_of_executed_units|stat::new_units_added|SUMMARY)|panicked|ERROR" "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -40 "$log" >&2
    fi
    rm -f "$log"
    rm -rf "$work"
    if [ "$status" -ne 0 ]; then
        echo "fuzzing $target failed (exit $status); see fuzz/artifacts/$target/" >&2
        exit "$status"
    fi
done
echo "fuzzing clean"
