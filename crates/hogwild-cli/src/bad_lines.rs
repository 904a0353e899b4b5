//! The bad-line budget of `train`, `eval` and `predict` (the library's [`ErrorPolicy::Skip`]), and
//! the warning that names the lines it skipped.

use clap::Args as ClapArgs;
use hogwild::feed::{ErrorPolicy, FeedStats};

/// `--max-bad-lines`.
#[derive(ClapArgs, Debug, Clone)]
pub struct BadLineArgs {
    /// Skip up to N lines that cannot be read as MultiSlot lines, warning with how many and where
    /// the first ones are, instead of stopping at the first (0, the default: stop). More than N
    /// is an error. A line that parses but does not fit the model (a label out of range) stops
    /// the run whatever N is, named by file and line: `hogwild check --config` lists them all.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_bad_lines: u64,
}

impl BadLineArgs {
    /// The feed's policy: strict, or skip with a count budget.
    pub fn policy(&self) -> ErrorPolicy {
        match self.max_bad_lines {
            0 => ErrorPolicy::Strict,
            n => ErrorPolicy::Skip {
                max_bad_lines: Some(n),
                max_bad_fraction: None,
            },
        }
    }

    /// Warns (on stderr) how many lines of `what` were skipped and where the first ones are,
    /// and what a `pipe_command` wrote on standard error; says nothing when neither happened.
    pub fn warn_skipped(&self, what: &str, stats: &FeedStats) {
        for note in &stats.pipe_stderr {
            eprintln!("warning: {note}");
        }
        if stats.bad_lines == 0 {
            return;
        }
        let plural = if stats.bad_lines == 1 { "" } else { "s" };
        let shown = match stats.bad_examples.len() {
            1 => "it is".to_string(),
            n => format!("the first {n}"),
        };
        eprintln!(
            "warning: skipped {} bad line{plural} in the {what} (--max-bad-lines {}); {shown}:",
            stats.bad_lines, self.max_bad_lines
        );
        for example in &stats.bad_examples {
            eprintln!("  {example}");
        }
    }
}
