//! `hogwild check`: validates MultiSlot files offline against a data.prototxt (and, with
//! `--config`, against a model) and reports every bad line with its file, line, slot and cause,
//! then a summary per problem class. A file argument that names nothing readable is reported and
//! the other files are still checked.

use std::path::PathBuf;

use anyhow::{bail, Result};
use hogwild::feed::{Batch, DataFeedDesc};
use hogwild::model::Model;
use hogwild::models::{Input, ModelConfig, ModelKind};
use hogwild::tools::{check_file_with, CheckOptions, CheckReport};

use crate::feed_args::{self, LinePrefixArgs};
use crate::models::{expand_files, AnyModel};
use crate::{paths, with_model};

/// Arguments of `hogwild check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The data feed description (Paddle's data.prototxt); `--desc` is the same option.
    #[arg(long, visible_alias = "desc")]
    pub feed: PathBuf,
    /// A model configuration (TOML): every line that parses is also checked against the model as
    /// training checks it (labels in range, word ids within the vocabulary, one value per id).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Data files (plain or gzip; piped through the desc's pipe_command): paths, `dir/part-*`
    /// patterns, `@list.txt`, or `-` (standard input).
    #[arg(required = true)]
    pub files: Vec<String>,
    /// Problems printed per file (all are counted).
    #[arg(long, default_value_t = 100)]
    pub max_errors: usize,
    #[command(flatten)]
    pub prefix: LinePrefixArgs,
}

/// Checks every file; fails if any line is bad or any file cannot be read.
pub fn run(args: Args) -> Result<()> {
    let desc = feed_args::read_desc(&args.feed)?;
    let Some(path) = &args.config else {
        return check_all(&args, &desc, &mut |_, _| Ok(()));
    };
    let config = ModelConfig::from_file(path)?;
    if let ModelKind::Word2vec(w2v) = &config.model {
        if w2v.input == Input::Text {
            bail!(
                "{}: word2vec with input = \"text\" reads plain text, not MultiSlot files: \
                 there is nothing to check against {}",
                path.display(),
                args.feed.display()
            );
        }
    }
    // A slot the model does not read would train as if absent: said, since it is rarely meant.
    for note in config.unread_slots(&desc)? {
        println!(
            "warning: {} with --feed {}: {note}",
            path.display(),
            args.feed.display()
        );
    }
    // The model's tables are allocated but never touched: checking costs no parameter memory.
    let model = AnyModel::new(&config, None)?;
    with_model!(&model, m => {
        let mut worker = m.worker(&desc)?;
        check_all(&args, &desc, &mut |batch: &Batch, i| m.check_instance(&mut worker, batch, i))
    })
}

/// Checks the files of every argument with `instance` (see [`check_file_with`]).
fn check_all(
    args: &Args,
    desc: &DataFeedDesc,
    instance: &mut dyn FnMut(&Batch, usize) -> hogwild::Result<()>,
) -> Result<()> {
    let (mut lines, mut bad, mut bad_files, mut checked, mut unreadable) = (0u64, 0u64, 0, 0, 0);
    paths::stdin_once(args.files.iter().map(String::as_str))?;
    for arg in &args.files {
        // Each argument on its own, so that one that matches nothing does not hide the others.
        let files = match expand_files(std::slice::from_ref(arg)) {
            Ok(files) => files,
            Err(e) => {
                println!("{e:#}");
                unreadable += 1;
                continue;
            }
        };
        for file in &files {
            let opts = CheckOptions {
                max_problems: args.max_errors,
                line_prefix: args.prefix.prefix(),
            };
            let report = match check_file_with(desc, file, &opts, instance) {
                Ok(report) => report,
                Err(e) => {
                    println!("{e}");
                    unreadable += 1;
                    continue;
                }
            };
            print_report(file, &report);
            checked += 1;
            lines += report.lines;
            bad += report.bad_lines;
            bad_files += usize::from(!report.is_clean());
        }
    }
    let unread = match unreadable {
        0 => String::new(),
        1 => "; 1 file argument could not be read".to_string(),
        n => format!("; {n} file arguments could not be read"),
    };
    if bad > 0 {
        bail!("{bad} of {lines} lines are bad, in {bad_files} of {checked} files{unread}");
    }
    if unreadable > 0 {
        bail!("all {lines} lines in {checked} files are good{unread}");
    }
    println!("all {lines} lines in {checked} files are good");
    Ok(())
}

/// Prints a file's problems and its summary line.
fn print_report(file: &std::path::Path, report: &CheckReport) {
    if let Some(note) = &report.pipe_stderr {
        println!("warning: {note}");
    }
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
}
