//! `hogwild train`: train a model from a configuration file (or resume a checkpoint) on data files.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use hogwild::executor::{self, EpochReport, Progress, RunOptions};
use hogwild::feed::{DataFeedDesc, FeedMode, InMemoryDataset};
use hogwild::models::ModelConfig;

use crate::bad_lines::BadLineArgs;
use crate::models::{default_threads, expand_files, prepare_inputs, AnyModel, Purpose};
use crate::paths;
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
    /// Save the model here (atomically, synced to disk): after the last epoch, and after an
    /// earlier one when --save-every seconds have passed since the last save (with --stream, at
    /// the end only).
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// With --save: the least seconds between two saves after epochs (0: after every epoch).
    /// Short epochs then do not spend their time writing checkpoints.
    #[arg(long, default_value_t = 60.0, value_parser = parse_seconds)]
    pub save_every: f64,
    /// Stream the files from disk every epoch instead of loading them into memory once (for data
    /// larger than memory).
    #[arg(long)]
    pub stream: bool,
    /// Seed of the shuffles of in-memory training: once over all instances, then every epoch
    /// within each thread's share (a thread that runs out of batches trains another's).
    #[arg(long, default_value_t = 1, conflicts_with = "no_shuffle")]
    pub shuffle_seed: u64,
    /// Keep the files' order in memory (no shuffle).
    #[arg(long)]
    pub no_shuffle: bool,
    /// With --stream: batches each worker's queue holds at most (more absorbs uneven reading,
    /// fewer holds less memory).
    #[arg(long, default_value_t = 4)]
    pub queue_batches: usize,
    #[command(flatten)]
    pub bad_lines: BadLineArgs,
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
    if args.config.is_some() && args.resume.is_some() {
        bail!("give either --config or --resume, not both");
    }
    let started = Instant::now();
    let desc = DataFeedDesc::from_file(&args.feed)?;
    // The configuration decides how the input files are prepared (word2vec text becomes id files
    // after a vocabulary pass), so it is read first; a saved model carries its own.
    let (config, saved) = match (&args.config, &args.resume) {
        (Some(path), None) => (ModelConfig::from_file(path)?, None),
        (None, Some(path)) => {
            let (config, model) = AnyModel::load(path)?;
            (config, Some(model))
        }
        _ => bail!("give --config (a new model) or --resume (a saved one)"),
    };
    paths::stdin_once(args.files.iter().chain(&args.test).map(String::as_str))?;
    let given = expand_files(&args.files)?;
    if let Some(save) = &args.save {
        let inputs = [args.config.as_deref(), Some(args.feed.as_path())];
        paths::refuse_overwrite(
            save,
            "--save",
            inputs
                .into_iter()
                .flatten()
                .chain(given.iter().map(PathBuf::as_path)),
        )?;
    }
    let purpose = match &saved {
        Some(model) => Purpose::Resume(model),
        None => Purpose::New,
    };
    let mut prepared = prepare_inputs(&config, &desc, given, purpose)?;
    if args.stream {
        paths::refuse_read_once(
            &prepared.files,
            "--stream reads the files again every epoch",
        )?;
    }
    let threads = args.threads.unwrap_or_else(default_threads);
    let mut options = args.report.options();
    options.feed.threads = threads;
    options.feed.epochs = args.epochs;
    options.feed.mode = if args.stream {
        FeedMode::Stream
    } else {
        FeedMode::InMemory {
            shuffle: (!args.no_shuffle).then_some(args.shuffle_seed),
        }
    };
    options.feed.queue_batches = args.queue_batches.max(1);
    options.feed.errors = args.bad_lines.policy();
    // Load the data before a new model exists: loading briefly holds the parsed files twice, and
    // the peak memory should not add that to the tables.
    let data = if args.stream {
        None
    } else {
        Some(
            InMemoryDataset::load(&desc, &prepared.files, &options.feed)
                .context("loading the training files")?,
        )
    };
    if let Some(data) = &data {
        args.bad_lines
            .warn_skipped("training files", data.load_stats());
    }
    let loaded = started.elapsed();
    let model = match saved {
        Some(model) => model,
        None => {
            let model = AnyModel::new(&config, prepared.vocab.take())?;
            with_model!(&model, m => executor::startup(m));
            model
        }
    };
    let ready = started.elapsed();
    let mut last_save = Instant::now();
    let hook = |e: &EpochReport| -> hogwild::Result<()> {
        println!("{}", e.line(threads));
        let due = e.epoch == args.epochs || last_save.elapsed().as_secs_f64() >= args.save_every;
        if let Some(path) = args.save.as_ref().filter(|_| due) {
            let stale = model.save(path).map_err(|err| hogwild::Error::Checkpoint {
                path: path.display().to_string(),
                reason: format!("{err:#}"),
            })?;
            if !stale.is_empty() {
                println!("{stale}");
            }
            println!("saved {} (epoch {})", path.display(), e.epoch);
            last_save = Instant::now();
        }
        Ok(())
    };
    let hook = std::sync::Mutex::new(hook);
    let call = |e: &EpochReport| (hook.lock().unwrap_or_else(|p| p.into_inner()))(e);
    let report = match &data {
        Some(data) => with_model!(&model, m =>
            executor::train_dataset(m, &desc, data, threads, &[], &options, Some(&call))),
        // One run streams every epoch: the feed re-reads the files, nothing is held.
        None => with_model!(&model, m =>
            executor::run_from_files(m, &desc, &prepared.files, threads, &[], &options, Some(&call))),
    }
    .context("training")?;
    if args.stream {
        args.bad_lines.warn_skipped("training files", &report.feed);
    }
    let trained = started.elapsed();
    println!(
        "time: load {:.3}s, model init {:.3}s, training {:.3}s, total {:.3}s",
        loaded.as_secs_f64(),
        (ready - loaded).as_secs_f64(),
        (trained - ready).as_secs_f64(),
        trained.as_secs_f64()
    );
    println!("feed: {}", report.feed);
    println!(
        "memory: parameters and optimizer state {:.1} MiB, data {:.1} MiB ({})",
        model.memory_bytes() as f64 / (1 << 20) as f64,
        report.data_bytes as f64 / (1 << 20) as f64,
        if args.stream {
            "feed queues, peak of one queue x threads"
        } else {
            "in-memory dataset and instance orders"
        }
    );
    if !args.test.is_empty() {
        let test = expand_files(&args.test)?;
        let test = prepare_inputs(&config, &desc, test, Purpose::Eval(&model))?;
        let mut eval = args.report.options();
        eval.feed.errors = args.bad_lines.policy();
        let report = with_model!(&model, m =>
            executor::eval_from_files(m, &desc, &test.files, threads, &[], &eval, None))
        .context("evaluating on the test files")?;
        args.bad_lines.warn_skipped("test files", &report.feed);
        println!("{}", crate::eval::test_line(&report));
    }
    Ok(())
}

/// A number of seconds: finite and not negative.
fn parse_seconds(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(s),
        Ok(s) => Err(format!(
            "{s} is not a number of seconds (finite, 0 or more)"
        )),
        Err(e) => Err(format!("\"{text}\" is not a number: {e}")),
    }
}
