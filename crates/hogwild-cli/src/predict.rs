//! `hogwild predict`: one line per instance from a saved model. The bag-of-words classifier writes
//! its most probable labels as fastText's `predict` does (`__label__a`; `-k`, `--threshold`), with
//! `--prob` each followed by its probability as `predict-prob` does (`__label__a 0.93`), or with
//! `--all-probs` a table (`class<TAB>p0 p1 ...`); the other models write their own lines (a
//! click probability).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args as ClapArgs;
use hogwild::executor::Run;
use hogwild::models::PredictionFormat;

use crate::bad_lines::BadLineArgs;
use crate::feed_args::{self, LinePrefixArgs};
use crate::labels::{self, TopArgs};
use crate::models::{expand_files, prepare_inputs, Purpose};
use crate::paths;
use crate::preflight::{self, parse_threads};
use crate::train::ReportArgs;
use crate::{interrupt, say, with_model};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// A model saved by `hogwild train --save`.
    #[arg(long)]
    pub model: PathBuf,
    /// DataFeedDesc in protobuf text format (the label slot may be absent or unused).
    #[arg(long)]
    pub feed: PathBuf,
    /// Data files: paths, `dir/part-*` patterns, or `@list.txt`.
    #[arg(required = true)]
    pub files: Vec<String>,
    /// Where to write the predictions (`-`: standard output). An existing file is replaced only
    /// once the predictions are whole.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Worker threads (default: the desc's thread_num if it sets one, else every core). Lines
    /// always follow the input order (files in the order given, lines in file order): each file
    /// is loaded in turn and its batches are written in sequence whichever thread finishes
    /// first.
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub top: TopArgs,
    /// Bag-of-words models: each label followed by its probability (fastText's predict-prob).
    #[arg(long)]
    pub prob: bool,
    /// Bag-of-words models: write `class<TAB>p0 p1 ...` instead, the most probable class id,
    /// then every class's probability in id order.
    #[arg(long, conflicts_with_all = ["k", "threshold", "prob"])]
    pub all_probs: bool,
    /// With a budget, a skipped line gets an empty output line: output line n is always the
    /// prediction of input line n.
    #[command(flatten)]
    pub bad_lines: BadLineArgs,
    /// With --parse-ins-id (or --parse-logkey) each prediction line is `<id><TAB><prediction>`.
    #[command(flatten)]
    pub prefix: LinePrefixArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

pub fn run(args: Args) -> Result<()> {
    preflight::output(&args.output, "-o")?;
    let desc = feed_args::read_desc(&args.feed)?;
    let threads = preflight::threads(feed_args::threads(args.threads, &desc, &args.feed));
    // The inputs before the model, which may take long to load, and before the output is touched.
    let files = expand_files(&args.files)?;
    paths::check_inputs("data file", files.iter().map(PathBuf::as_path))?;
    let inputs = [args.model.as_path(), args.feed.as_path()];
    paths::refuse_overwrite(
        &args.output,
        "the output",
        inputs.into_iter().chain(files.iter().map(PathBuf::as_path)),
    )?;
    let (config, mut model) = crate::models::load(&args.model)?;
    match model.labels_mut() {
        Some(labels) if args.all_probs => labels.set_format(PredictionFormat::Table),
        Some(labels) => {
            labels::note_unnamed(labels, &args.model);
            labels.set_format(PredictionFormat::Labels {
                top: args.top.top(),
                probs: args.prob,
            });
        }
        None if args.top.given() || args.prob || args.all_probs => {
            return Err(labels::not_bow(
                &config,
                &args.model,
                "-k, --threshold, --prob and --all-probs",
            ))
        }
        None => {}
    }
    let mut options = args.report.options();
    options.stop = interrupt::install()?;
    let prepared = prepare_inputs(&config, &desc, files, Purpose::Eval(&model))?;
    // The output is replaced only once the predictions are whole.
    let to_stdout = paths::is_stdio(&args.output);
    let mut out = paths::output(&args.output, to_stdout)?;
    options.feed.errors = args.bad_lines.policy();
    options.feed.line_prefix = args.prefix.prefix();
    let report = with_model!(&model, m => Run::new(m, &desc)
        .threads(threads)
        .options(&options)
        .predict(&prepared.files, &mut out))?;
    let name = out.name().to_string();
    out.commit()?;
    args.bad_lines.warn_skipped("input files", &report.feed);
    let skipped = match report.feed.bad_lines {
        0 => String::new(),
        n => format!(" and {n} empty lines for skipped input lines"),
    };
    say!(
        to_stdout,
        "wrote {} predictions{skipped} to {name}",
        report.instances
    );
    Ok(())
}
