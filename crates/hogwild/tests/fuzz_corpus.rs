//! The fuzz targets on every `cargo test`, with no extra toolchain: each target's checked-in corpus
//! (`tests/corpus/<target>/`, inside the crate so that the packaged crate's tests read it too) is replayed, then seeded random mutations of it (bit flips, bytes
//! and tokens inserted or replaced, ranges deleted, duplicated or spliced from another entry)
//! run through the same target functions as cargo-fuzz (`tests/support/fuzz_targets.rs`) for a
//! bounded number of inputs and time. Without coverage feedback this finds less than `make
//! fuzz` (libFuzzer, nightly); it keeps every change to the parsers honest against the corpus
//! and its neighbourhood in seconds, on any machine.
//!
//! The inputs are the same on every run; `HOGWILD_FUZZ_SEED` changes them, and
//! `HOGWILD_FUZZ_INPUTS` / `HOGWILD_FUZZ_SECONDS` (per target, default 100000 inputs, at most 20
//! seconds) change how many are tried. A failure prints the seed, the input number and the input.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hogwild::rng::SplitMix64;

#[path = "support/fuzz_targets.rs"]
mod targets;

/// Tokens the parsers give meaning to (or choke on), inserted whole by the mutator.
const TOKENS: &[&[u8]] = &[
    b"0",
    b"1",
    b"2",
    b"-1",
    b"4294967296",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999",
    b"0.5",
    b"-2e-3",
    b"1e39",
    b"nan",
    b"inf",
    b"+",
    b".",
    b" ",
    b"\t",
    b"\r",
    b"\n",
    b"\r\n",
    b"\0",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xc3\xa9",
    b"{",
    b"}",
    b"\"",
    b":",
    b"#",
    b"\\",
    b"slots { name: \"s\" type: \"uint64\" is_used: true }",
    b"name: ",
    b"type: \"float\"",
    b"is_dense: true",
    b"is_used: false",
    b"shape: 2",
    b"shape: -1",
    b"batch_size: ",
    b"multi_slot_desc {",
    b"pipe_command: \"cat\"",
    b"thread_num: 4",
];

/// The checked-in corpus of `target`, in name order.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(target);
    let mut entries: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "{}: no corpus", dir.display());
    entries
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        })
        .unwrap_or(default)
}

/// A random number below `n` (at least 1).
fn below(rng: &mut SplitMix64, n: usize) -> usize {
    (rng.next() % n.max(1) as u64) as usize
}

/// A place in `input` to change: half the time just after a separator (where a token starts, so
/// that a structured input stays mostly well formed), else anywhere.
fn place(rng: &mut SplitMix64, input: &[u8]) -> usize {
    let at = below(rng, input.len() + 1);
    if rng.next() & 1 == 0 {
        return at;
    }
    input[at..]
        .iter()
        .position(|b| b" \t\n{:".contains(b))
        .map_or(at, |k| at + k + 1)
}

/// `input` changed by random mutations (one half the time, two a quarter, at most four);
/// `other` is another corpus entry to splice from.
fn mutate(rng: &mut SplitMix64, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + (rng.next().trailing_zeros() as usize).min(3) {
        let at = place(rng, &out);
        match below(rng, 8) {
            0 if !out.is_empty() => {
                let i = below(rng, out.len());
                out[i] ^= 1 << below(rng, 8);
            }
            1 if !out.is_empty() => {
                let i = below(rng, out.len());
                out[i] = rng.next() as u8;
            }
            2 | 3 => {
                let token = TOKENS[below(rng, TOKENS.len())];
                out.splice(at..at, token.iter().copied());
            }
            4 if !out.is_empty() => {
                let end = (at + 1 + below(rng, 8)).min(out.len());
                out.drain(at.min(end)..end);
            }
            5 if !out.is_empty() => {
                let start = below(rng, out.len());
                let end = (start + 1 + below(rng, 16)).min(out.len());
                let piece = out[start..end].to_vec();
                out.splice(at..at, piece);
            }
            6 if !other.is_empty() => {
                let start = below(rng, other.len());
                let end = (start + 1 + below(rng, 32)).min(other.len());
                out.splice(at..at, other[start..end].iter().copied());
            }
            _ => out.truncate(at),
        }
    }
    out.truncate(4096);
    out
}

/// Runs `target` on `input`, turning a panic into a message that reproduces it.
fn run(name: &str, target: fn(&[u8]), input: &[u8], what: &str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(input))) {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!(
            "fuzz target {name} failed on {what}: {message}\ninput: b\"{}\"",
            input.escape_ascii()
        );
    }
}

/// The corpus, then the mutations, through `target`.
fn replay(name: &str, target: fn(&[u8])) {
    let entries = corpus(name);
    for (file, input) in &entries {
        run(name, target, input, &format!("corpus entry {file}"));
    }
    let seed = setting("HOGWILD_FUZZ_SEED", 0x5EED);
    let inputs = setting("HOGWILD_FUZZ_INPUTS", 100_000);
    let limit = Duration::from_secs(setting("HOGWILD_FUZZ_SECONDS", 20));
    let mut rng = SplitMix64(seed ^ name.len() as u64);
    let started = Instant::now();
    for n in 0..inputs {
        if started.elapsed() > limit {
            eprintln!("{name}: {n} mutated inputs in {limit:?}, stopped at the time limit");
            break;
        }
        let base = &entries[below(&mut rng, entries.len())].1;
        let other = &entries[below(&mut rng, entries.len())].1;
        let input = mutate(&mut rng, base, other);
        run(
            name,
            target,
            &input,
            &format!("mutated input {n} of seed {seed:#x}"),
        );
    }
}

#[test]
fn multislot_line_corpus_and_mutations() {
    replay("multislot_line", targets::multislot_line);
}

#[test]
fn desc_text_corpus_and_mutations() {
    replay("desc_text", targets::desc_text);
}
