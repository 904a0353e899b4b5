//! What the CLI tests share: running the built binary.
//!
//! A binary built with the `tf` feature links TensorFlow, which prints a start-up notice on
//! standard error ("oneDNN custom operations are on", read before `main` runs) unless oneDNN's
//! custom operations are off; the tests turn them off, so that what they read on standard error
//! is the command's own. No CLI test runs a TensorFlow graph.

use std::path::Path;
use std::process::{Command, Output};

/// The `hogwild` binary with `args`, to run in `dir` as a user runs it: no backtraces, and no
/// TensorFlow start-up notice (see the module docs).
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hogwild"));
    command
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env("TF_ENABLE_ONEDNN_OPTS", "0");
    command
}

/// Runs the `hogwild` binary with `args` in `dir` ([`command`]).
pub fn hogwild(dir: &Path, args: &[&str]) -> Output {
    command(dir, args)
        .output()
        .expect("the hogwild binary runs")
}

/// [`hogwild`] with `env` set on top (to see what a user with those variables sees).
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn hogwild_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    command(dir, args)
        .envs(env.iter().copied())
        .output()
        .expect("the hogwild binary runs")
}

/// The data.prototxt of the logistic-regression setups: one uint64 slot `a` and a label.
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub const LR_DESC: &str = "name: \"MultiSlotDataFeed\"\nbatch_size: 16\nmulti_slot_desc {\n  \
    slots { name: \"a\" type: \"uint64\" is_dense: false is_used: true }\n  \
    slots { name: \"label\" type: \"uint64\" is_dense: false is_used: true }\n}\n";

/// A logistic-regression setup in `dir`: `data.prototxt` ([`LR_DESC`]), `lr.toml` (64 buckets,
/// Adagrad at 0.1) and `data` as `train.ms`.
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn lr_setup(dir: &Path, data: &str) {
    std::fs::write(dir.join("data.prototxt"), LR_DESC).unwrap();
    std::fs::write(
        dir.join("lr.toml"),
        "[model]\nkind = \"lr\"\nbuckets = 64\n\n[optimizer]\nkind = \"adagrad\"\nlr = 0.1\n",
    )
    .unwrap();
    std::fs::write(dir.join("train.ms"), data).unwrap();
}

/// `lines` lines for [`lr_setup`]: feature `i % 7`, label `i % 2`.
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn lr_lines(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("1 {} 1 {}\n", i % 7, i % 2))
        .collect()
}

/// Output bytes as text (lossy).
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `hogwild args` in `dir`; its standard output, after checking that it succeeded.
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let out = hogwild(dir, args);
    assert!(
        out.status.success(),
        "hogwild {args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs `hogwild args` in `dir`; its standard error, after checking that it failed.
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn fails(dir: &Path, args: &[&str]) -> String {
    let out = hogwild(dir, args);
    assert!(
        !out.status.success(),
        "hogwild {args:?} succeeded: {}",
        text(&out.stdout)
    );
    text(&out.stderr)
}

/// `hogwild convert --from fasttext input -o output more...` in `dir`; its standard output.
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn convert_text(dir: &Path, input: &str, output: &str, more: &[&str]) -> String {
    let mut args = vec!["convert", "--from", "fasttext", input, "-o", output];
    args.extend_from_slice(more);
    ok(dir, &args)
}
