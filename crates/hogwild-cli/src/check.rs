//! `hogwild check`: validates MultiSlot files offline against a data.prototxt and reports every
//! bad line with its file, line, slot and cause, then a summary per problem class.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use hogwild::feed::DataFeedDesc;
use hogwild::tools::check_file;

use crate::paths;

/// Arguments of `hogwild check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The data feed description (Paddle's data.prototxt).
    #[arg(long)]
    pub desc: PathBuf,
    /// Data files (plain or gzip; piped through the desc's pipe_command; `-`: standard input).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Problems printed per file (all are counted).
    #[arg(long, default_value_t = 100)]
    pub max_errors: usize,
}

/// Checks every file; fails if any line is bad.
pub fn run(args: Args) -> Result<()> {
    let desc = DataFeedDesc::from_file(&args.desc)?;
    paths::stdin_once(args.files.iter().filter_map(|f| f.to_str()))?;
    let (mut lines, mut bad, mut bad_files) = (0u64, 0u64, 0usize);
    for file in &args.files {
        let report = check_file(&desc, &paths::input(file), args.max_errors)
            .with_context(|| format!("checking {}", file.display()))?;
        for problem in &report.problems {
            println!("{problem}");
        }
        if report.bad_lines as usize > report.problems.len() {
            println!(
                "{}: ... {} more bad lines not shown",
                file.display(),
                report.bad_lines as usize - report.problems.len()
            );
        }
        let classes: Vec<String> = report
            .classes
            .iter()
            .map(|(class, n)| format!("{class}: {n}"))
            .collect();
        println!(
            "{}: {} lines, {} bad{}",
            file.display(),
            report.lines,
            report.bad_lines,
            if classes.is_empty() {
                String::new()
            } else {
                format!(" ({})", classes.join(", "))
            }
        );
        lines += report.lines;
        bad += report.bad_lines;
        bad_files += usize::from(!report.is_clean());
    }
    if bad > 0 {
        bail!(
            "{bad} of {lines} lines are bad, in {bad_files} of {} files",
            args.files.len()
        );
    }
    println!("all {lines} lines in {} files are good", args.files.len());
    Ok(())
}
