//! Offline validation of MultiSlot files (`hogwild check`): every bad line, with its file, line,
//! slot and cause, grouped by problem class (Paddle's CheckFile classes: zero, negative or
//! too-large counts, values out of range or not numbers, truncated lines, trailing garbage).
//! Given a model's check of an instance ([`crate::Model::check_instance`]), also every line that
//! parses but that the model would refuse in training (a label out of range, a word id past the
//! vocabulary), before any training starts.

use std::collections::BTreeMap;
use std::path::Path;

use crate::feed::{Batch, DataFeedDesc, LinePrefix, ReadContext, Source};
use crate::{Error, Result};

/// What checking one file found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckReport {
    /// Lines read.
    pub lines: u64,
    /// Lines with a problem.
    pub bad_lines: u64,
    /// Bad lines per problem class.
    pub classes: BTreeMap<&'static str, u64>,
    /// The first `max_problems` problems, in file order.
    pub problems: Vec<Error>,
    /// What the desc's `pipe_command` wrote on standard error while it read the file well
    /// (naming the command and the file); a command that failed, or wrote no line for a file
    /// that is not empty, fails the check of the file instead.
    pub pipe_stderr: Option<String>,
}

impl CheckReport {
    /// Whether the file has no problem.
    pub fn is_clean(&self) -> bool {
        self.bad_lines == 0
    }
}

/// How [`check_file_with`] reads a file.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOptions {
    /// Problems kept (all are counted).
    pub max_problems: usize,
    /// The fields before the slots on every line (Paddle's instance id, content and log key).
    pub line_prefix: LinePrefix,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_problems: 100,
            line_prefix: LinePrefix::default(),
        }
    }
}

/// The problem class of a line that parses but that the model refuses.
pub const MODEL_CLASS: &str = "does not fit the model";

/// Checks every line of `path` (through the desc's `pipe_command`, gzip recognised) and keeps the
/// first `max_problems` problems. Errors only if the file cannot be read at all.
pub fn check_file(desc: &DataFeedDesc, path: &Path, max_problems: usize) -> Result<CheckReport> {
    let opts = CheckOptions {
        max_problems,
        ..CheckOptions::default()
    };
    check_file_with(desc, path, &opts, &mut |_, _| Ok(()))
}

/// [`check_file`] as `opts` says, and every line that parses checked by `instance` too (called with the batch
/// and the line's instance in it: a model's [`crate::Model::check_instance`]). A line it refuses
/// is a problem of class [`MODEL_CLASS`], named `file:line: slot "name": cause`.
pub fn check_file_with(
    desc: &DataFeedDesc,
    path: &Path,
    opts: &CheckOptions,
    instance: &mut dyn FnMut(&Batch, usize) -> Result<()>,
) -> Result<CheckReport> {
    let max_problems = opts.max_problems;
    let context = ReadContext::new(desc, opts.line_prefix);
    let mut source = Source::open(path, desc.pipe_command())?;
    // Dense slots without a shape are checked against the previous good line, so the batch
    // keeps that line only.
    let mut batch = Batch::empty(desc);
    let mut line = Vec::new();
    let mut report = CheckReport::default();
    while source.read_line(&mut line)? {
        report.lines += 1;
        match context.parser.parse_into(&line, &mut batch) {
            Ok(()) => {
                if batch.len > 1 {
                    batch = single_last(&batch);
                }
                if let Err(error) = instance(&batch, batch.len - 1) {
                    report.bad_lines += 1;
                    *report.classes.entry(MODEL_CLASS).or_insert(0) += 1;
                    if report.problems.len() < max_problems {
                        report.problems.push(match error {
                            Error::BadInstance { slot, reason, .. } => Error::BadRecord {
                                file: source.name().to_string(),
                                line: report.lines,
                                slot,
                                reason,
                            },
                            other => other,
                        });
                    }
                }
            }
            Err(err) => {
                report.bad_lines += 1;
                *report.classes.entry(err.kind.class()).or_insert(0) += 1;
                if report.problems.len() < max_problems {
                    report
                        .problems
                        .push(context.error(source.name(), report.lines, err));
                }
            }
        }
    }
    source.finish()?;
    report.pipe_stderr = source.take_stderr();
    Ok(report)
}

/// The last instance of `batch` as a batch of one.
fn single_last(batch: &Batch) -> Batch {
    let mut one = Batch::empty_like(batch);
    if batch.len > 0 {
        one.push_instance(batch, batch.len - 1);
    }
    one
}
