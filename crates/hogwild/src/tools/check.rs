//! Offline validation of MultiSlot files (`hogwild check`): every bad line, with its file, line,
//! slot and cause, grouped by problem class (Paddle's CheckFile classes: zero, negative or
//! too-large counts, values out of range or not numbers, truncated lines, trailing garbage).

use std::collections::BTreeMap;
use std::path::Path;

use crate::feed::{Batch, DataFeedDesc, ReadContext, Source};
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
}

impl CheckReport {
    /// Whether the file has no problem.
    pub fn is_clean(&self) -> bool {
        self.bad_lines == 0
    }
}

/// Checks every line of `path` (through the desc's `pipe_command`, gzip recognised) and keeps the
/// first `max_problems` problems. Errors only if the file cannot be read at all.
pub fn check_file(desc: &DataFeedDesc, path: &Path, max_problems: usize) -> Result<CheckReport> {
    let context = ReadContext::new(desc);
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
