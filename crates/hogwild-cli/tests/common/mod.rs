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
