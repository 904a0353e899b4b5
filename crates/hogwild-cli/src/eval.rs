//! `hogwild eval`: the metrics of a saved model on data files, printed as `hogwild train --test`
//! prints them.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args as ClapArgs;
use hogwild::executor::{self, RunReport};
use hogwild::feed::DataFeedDesc;

use crate::bad_lines::BadLineArgs;
use crate::models::{expand_files, prepare_inputs, AnyModel, Purpose};
use crate::paths;
use crate::preflight::{self, parse_threads};
use crate::train::ReportArgs;
use crate::{interrupt, with_model};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// A model saved by `hogwild train --save`.
    #[arg(long)]
    pub model: PathBuf,
    /// DataFeedDesc in protobuf text format.
    #[arg(long)]
    pub feed: PathBuf,
    /// Data files: paths, `dir/part-*` patterns, or `@list.txt`.
    #[arg(required = true)]
    pub files: Vec<String>,
    /// Worker threads (default: every core).
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub bad_lines: BadLineArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

pub fn run(args: Args) -> Result<()> {
    let threads = preflight::threads(args.threads);
    // The inputs before the model, which may take long to load.
    let files = expand_files(&args.files)?;
    paths::check_inputs("data file", files.iter().map(PathBuf::as_path))?;
    let (config, model) = AnyModel::load(&args.model)?;
    let desc = DataFeedDesc::from_file(&args.feed)?;
    let mut options = args.report.options();
    options.stop = interrupt::install()?;
    let prepared = prepare_inputs(&config, &desc, files, Purpose::Eval(&model))?;
    options.feed.errors = args.bad_lines.policy();
    let report = with_model!(&model, m =>
        executor::eval_from_files(m, &desc, &prepared.files, threads, &[], &options, None))?;
    args.bad_lines
        .warn_skipped("evaluation files", &report.feed);
    println!("{}", test_line(&report));
    Ok(())
}

/// `test: N instances  loss L  accuracy A ...`, and why a metric the model reports is missing
/// (`auc n/a: needs both classes, ...`).
pub fn test_line(report: &RunReport) -> String {
    let mut line = format!("test: {} instances", report.instances);
    for (name, value) in &report.fetched {
        line.push_str(&format!("  {name} {value:.5}"));
    }
    for (name, reason) in &report.unavailable {
        line.push_str(&format!("  {name} n/a: {reason}"));
    }
    line
}
