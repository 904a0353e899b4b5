#!/usr/bin/env bash
# `cargo package` of every published crate (hogwild-train, the core), then its tests, doc tests
# included, run from the unpacked package in a directory outside the workspace: what `cargo test`
# does in the crate as the registry would serve it. Files the tests read must be inside the
# package (the fuzz corpus is, in tests/corpus). target/ is shared with the workspace so that
# dependencies are not built twice.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for package in hogwild-train; do
    version=$(cargo pkgid -p "$package" | sed 's/.*[@#]//')
    # --allow-dirty: `make test` checks the working tree, committed or not.
    cargo package --quiet --allow-dirty --no-verify -p "$package"
    # -m: the files get the time of extraction, not their packaged one. Cargo hashes a path
    # package by its path relative to the workspace, so an earlier run's test binaries from
    # another temporary directory would otherwise pass for fresh, with that directory's
    # CARGO_MANIFEST_DIR compiled in.
    tar -xzmf "target/package/$package-$version.crate" -C "$work"
    echo "== $package $version: tests from the package"
    (cd "$work/$package-$version" && CARGO_TARGET_DIR=$root/target cargo test --locked --quiet)
done
