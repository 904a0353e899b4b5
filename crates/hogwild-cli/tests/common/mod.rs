//! What the CLI tests share: running the built binary.

use std::path::Path;
use std::process::{Command, Output};

/// Runs the `hogwild` binary with `args` in `dir` (no backtraces, as a user sees it).
pub fn hogwild(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hogwild"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("the hogwild binary runs")
}

/// [`hogwild`] with `env` set on top (to see what a user with those variables sees).
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn hogwild_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hogwild"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .envs(env.iter().copied())
        .output()
        .expect("the hogwild binary runs")
}

/// What the command itself wrote to standard error: its lines, less the start-up notices of
/// TensorFlow (absl log lines), which a binary built with the `tf` feature prints before any of
/// our code runs.
#[allow(dead_code)] // reason: each test binary compiles this module; not all of them use this
pub fn own_stderr(out: &Output) -> Vec<String> {
    let absl = |l: &str| {
        let word = l.split(' ').next().unwrap_or("");
        l.starts_with("WARNING: All log messages before absl")
            || (word.len() == 5
                && word.starts_with(['I', 'W', 'E'])
                && word[1..].bytes().all(|b| b.is_ascii_digit()))
    };
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !absl(l))
        .map(str::to_string)
        .collect()
}
