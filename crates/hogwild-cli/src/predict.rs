//! `hogwild predict`: one line per instance (`class<TAB>probabilities`) from a saved model.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args as ClapArgs;
use hogwild::executor;
use hogwild::feed::DataFeedDesc;

use crate::models::{expand_files, prepare_inputs, AnyModel};
use crate::preflight::{self, parse_threads};
use crate::train::ReportArgs;
use crate::{interrupt, with_model};

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
    /// Where to write the predictions.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Worker threads (default: every core). Lines always follow the input order (files in the
    /// order given, lines in file order): each file is loaded in turn and its batches are written
    /// in sequence whichever thread finishes first.
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub report: ReportArgs,
}

pub fn run(args: Args) -> Result<()> {
    preflight::output(&args.output, "-o")?;
    let threads = preflight::threads(args.threads);
    // The inputs before the model, which may take long to load.
    let files = expand_files(&args.files)?;
    preflight::inputs(&files, "data file")?;
    let (config, model) = AnyModel::load(&args.model)?;
    let desc = DataFeedDesc::from_file(&args.feed)?;
    let mut options = args.report.options();
    options.stop = interrupt::install()?;
    let files = prepare_inputs(&config, &desc, files, false)?;
    let report = with_model!(&model, m => executor::eval_from_files(
        m, &desc, &files, threads, &[], &options, Some(&args.output)))?;
    println!(
        "wrote {} predictions to {}",
        report.instances,
        args.output.display()
    );
    Ok(())
}
