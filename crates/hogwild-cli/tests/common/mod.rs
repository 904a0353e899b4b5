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
