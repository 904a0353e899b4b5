//! `hogwild train`: train a model from a configuration file (or resume a checkpoint) on data files.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use hogwild::executor::{self, Progress, RunOptions};
use hogwild::feed::DataFeedDesc;
use hogwild::models::ModelConfig;

use crate::models::{default_threads, expand_files, prepare_inputs, AnyModel};
use crate::with_model;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Model configuration (TOML). Not needed with --resume.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Continue training a saved model (its configuration is stored in it).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// DataFeedDesc in protobuf text format (slots, batch size).
    #[arg(long)]
    pub feed: PathBuf,
    /// Data files in MultiSlot format: paths, `dir/part-*` patterns, or `@list.txt`.
    #[arg(required = true)]
    pub files: Vec<String>,
    /// Worker threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Passes over the files.
    #[arg(long, default_value_t = 1)]
    pub epochs: usize,
    /// Evaluate on these files after training (paths, patterns or `@list.txt`).
    #[arg(long, num_args = 1..)]
    pub test: Vec<String>,
    /// Save the model here after every epoch (atomically).
    #[arg(long)]
    pub save: Option<PathBuf>,
    #[command(flatten)]
    pub report: ReportArgs,
}

/// Options shared by train, eval and predict.
#[derive(ClapArgs, Debug, Clone)]
pub struct ReportArgs {
    /// Print a progress line every this many batches (0: none).
    #[arg(long, default_value_t = 100)]
    pub print_period: usize,
    /// Print per-stage times (read, forward, backward, update).
    #[arg(long)]
    pub debug: bool,
    /// Print no progress.
    #[arg(long)]
    pub quiet: bool,
}

impl ReportArgs {
    pub fn options(&self) -> RunOptions {
        RunOptions {
            print_period: self.print_period,
            progress: if self.quiet {
                Progress::Quiet
            } else {
                Progress::Auto
            },
            debug: self.debug,
            ..RunOptions::default()
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    let desc = DataFeedDesc::from_file(&args.feed)?;
    let (config, model, files) = match (&args.config, &args.resume) {
        (Some(_), Some(_)) => bail!("give either --config or --resume, not both"),
        (None, None) => bail!("give --config (a new model) or --resume (a saved one)"),
        (Some(path), None) => {
            let config = ModelConfig::from_file(path)?;
            let files = prepare_inputs(&config, &desc, expand_files(&args.files)?, true)?;
            let model = AnyModel::new(&config)?;
            with_model!(&model, m => executor::startup(m));
            (config, model, files)
        }
        (None, Some(path)) => {
            let (config, model) = AnyModel::load(path)?;
            let files = prepare_inputs(&config, &desc, expand_files(&args.files)?, false)?;
            (config, model, files)
        }
    };
    let threads = args.threads.unwrap_or_else(default_threads);
    let options = args.report.options();
    for epoch in 1..=args.epochs {
        let report = with_model!(&model, m =>
            executor::run_from_files(m, &desc, &files, threads, &[], &options))
        .with_context(|| format!("training epoch {epoch}"))?;
        print!(
            "epoch {epoch}: {} instances in {:.2}s ({:.0}/s, {threads} threads)",
            report.instances,
            report.elapsed.as_secs_f64(),
            report.instances_per_sec()
        );
        for (name, value) in &report.fetched {
            print!("  {name} {value:.5}");
        }
        println!();
        if let Some(path) = &args.save {
            model.save(path)?;
        }
    }
    if let Some(path) = &args.save {
        println!("saved {}", path.display());
    }
    println!(
        "parameters and optimizer state: {:.1} MiB",
        model.memory_bytes() as f64 / (1 << 20) as f64
    );
    if !args.test.is_empty() {
        let test = prepare_inputs(&config, &desc, expand_files(&args.test)?, false)?;
        let report = with_model!(&model, m =>
            executor::eval_from_files(m, &desc, &test, threads, &[], &options, None))
        .context("evaluating on the test files")?;
        print!("test: {} instances", report.instances);
        for (name, value) in &report.fetched {
            print!("  {name} {value:.5}");
        }
        println!();
    }
    Ok(())
}
