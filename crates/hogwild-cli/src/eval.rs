//! `hogwild eval`: the metrics of a saved model on data files, printed as `hogwild train --test`
//! prints them; for the bag-of-words classifier, with `-k`, `--threshold` or `--per-label`, then
//! also fastText's `test` lines (`N`, `P@k`, `R@k`), after its `test-label` lines with
//! `--per-label` (each label's F1, precision and recall).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args as ClapArgs;
use hogwild::executor::{Run, RunReport};

use crate::bad_lines::BadLineArgs;
use crate::feed_args::{self, LinePrefixArgs};
use crate::labels::{self, general_metrics, label_line, TopArgs};
use crate::models::{expand_files, prepare_inputs, Purpose};
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
    /// Worker threads (default: the desc's thread_num if it sets one, else every core).
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<usize>,
    // With -k or --threshold (bag-of-words models): precision and recall of the labels they
    // select, as fastText's test prints them (N, P@k, R@k).
    #[command(flatten)]
    pub top: TopArgs,
    /// Bag-of-words models: also each label's F1, precision and recall of the labels -k and
    /// --threshold select, as fastText's test-label prints them.
    #[arg(long)]
    pub per_label: bool,
    #[command(flatten)]
    pub bad_lines: BadLineArgs,
    #[command(flatten)]
    pub prefix: LinePrefixArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

pub fn run(args: Args) -> Result<()> {
    let desc = feed_args::read_desc(&args.feed)?;
    let threads = preflight::threads(feed_args::threads(args.threads, &desc, &args.feed));
    // The inputs before the model, which may take long to load.
    let files = expand_files(&args.files)?;
    paths::check_inputs("data file", files.iter().map(PathBuf::as_path))?;
    let (config, mut model) = crate::models::load(&args.model)?;
    let counting = args.top.given() || args.per_label;
    let top = args.top.top();
    match model.labels_mut() {
        Some(labels) if counting => {
            if args.per_label {
                labels::note_unnamed(labels, &args.model);
            }
            labels.count_top(Some(top));
        }
        None if counting => {
            return Err(labels::not_bow(
                &config,
                &args.model,
                "-k, --threshold and --per-label",
            ))
        }
        _ => {}
    }
    let mut options = args.report.options();
    options.stop = interrupt::install()?;
    let prepared = prepare_inputs(&config, &desc, files, Purpose::Eval(&model))?;
    options.feed.errors = args.bad_lines.policy();
    options.feed.line_prefix = args.prefix.prefix();
    let report = with_model!(&model, m =>
        Run::new(m, &desc).threads(threads).options(&options).eval(&prepared.files))?;
    args.bad_lines
        .warn_skipped("evaluation files", &report.feed);
    println!("{}", test_line(&report));
    if let Some(labels) = model.labels_mut().filter(|_| counting) {
        let counts = labels.take_counts();
        if args.per_label {
            for id in 0..labels.classes() {
                println!("{}", label_line(&labels.name(id), &counts.label(id)));
            }
        }
        println!("{}", general_metrics(&counts, top.k, args.per_label));
    }
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
