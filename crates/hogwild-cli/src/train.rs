//! `hogwild train`: train a model from a configuration file (or resume a checkpoint) on data files.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args as ClapArgs;
use hogwild::executor::{self, EpochReport, Progress, Run, RunOptions, RunReport, Span, Stop};
use hogwild::feed::{DataFeedDesc, FeedMode, InMemoryDataset};
use hogwild::models::{ModelConfig, ModelKind};

use crate::autotune;
use crate::bad_lines::BadLineArgs;
use crate::feed_args::{self, LinePrefixArgs};
use crate::labels;
use crate::models::{expand_files, prepare_inputs, AnyModel, Purpose};
use crate::paths;
use crate::preflight::{self, parse_epochs, parse_threads};
use crate::{interrupt, with_model};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Model configuration (TOML). Not needed with --resume.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Continue training a saved model (its configuration is stored in it).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Bag-of-words models: name the labels with the `label` lines of this vocabulary (written
    /// by `hogwild convert --from fasttext --build-vocab --vocab FILE` for the training data).
    /// The names are saved in the model, so that `predict` and `eval` write them as fastText
    /// does; a resumed model keeps its names without it.
    #[arg(long, value_name = "FILE")]
    pub labels: Option<PathBuf>,
    /// DataFeedDesc in protobuf text format (slots, batch size).
    #[arg(long)]
    pub feed: PathBuf,
    /// Data files in MultiSlot format: paths, `dir/part-*` patterns, or `@list.txt`.
    #[arg(required = true)]
    pub files: Vec<String>,
    /// Worker threads (default: the desc's thread_num if it sets one, else every core).
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<usize>,
    /// Passes over the files (a resumed model's are numbered after those it was trained for).
    #[arg(long, default_value_t = 1, value_parser = parse_epochs)]
    pub epochs: usize,
    /// Evaluate on these files after training (paths, patterns or `@list.txt`).
    #[arg(long, num_args = 1..)]
    pub test: Vec<String>,
    /// Evaluate on these files after every epoch (paths, patterns or `@list.txt`): the epoch
    /// line shows their metric (auc for lr, fm and ffm, accuracy for bow) and loss, and --save
    /// (required) holds the model of the best epoch so far, written when an epoch improves on
    /// it (--save-every does not apply). Each epoch is then a run of its own, so that every
    /// epoch is validated on the model as it ended; its shuffle is seeded by --shuffle-seed and
    /// the epoch.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub validation: Vec<String>,
    /// With --validation: stop when the validation metric has not improved for N epochs in a
    /// row (xLearn's early stopping); --save holds the best epoch's model.
    #[arg(long, value_name = "N", value_parser = parse_patience)]
    pub early_stop: Option<usize>,
    /// Search the learning rate, width, epochs and bigrams (see --tune) for the best score on the
    /// --validation files within this many seconds, as fastText's autotune does: the validation
    /// accuracy of a bag-of-words model, the AUC of a CTR model. The first trial trains the
    /// configuration and --epochs as given; --save (optional here) holds the best model so far.
    /// The trials are not validated per epoch.
    #[arg(
        long,
        value_name = "SECONDS",
        value_parser = autotune::parse_budget,
        requires = "validation",
        conflicts_with_all = ["resume", "stream", "early_stop"]
    )]
    pub budget: Option<f64>,
    /// With --budget: the settings to search, comma-separated (default: all the model has).
    #[arg(long, value_delimiter = ',', requires = "budget")]
    pub tune: Vec<autotune::Knob>,
    /// Save the model here (atomically, synced to disk): after the last epoch, and after an
    /// earlier one when --save-every seconds have passed since the last save; and when Ctrl-C
    /// (SIGINT) or SIGTERM stops the run, with what it trained until then.
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
    pub prefix: LinePrefixArgs,
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
    /// Print only errors, warnings and results (saved models, test and eval metrics, predictions
    /// written): no progress, epoch or time lines.
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
    // Everything that can be found wrong without reading data is checked first: found after
    // training, a mistake would cost the training.
    if let Some(path) = &args.save {
        preflight::output(path, "--save")?;
    }
    if args.early_stop.is_some() && args.validation.is_empty() {
        bail!("--early-stop stops on the validation metric: give --validation FILE too");
    }
    if !args.validation.is_empty() && args.save.is_none() && args.budget.is_none() {
        bail!("--validation keeps the best epoch's model in the file of --save: give --save");
    }
    let started = Instant::now();
    let desc = feed_args::read_desc(&args.feed)?;
    let threads = preflight::threads(feed_args::threads(args.threads, &desc, &args.feed));
    // The configuration decides how the input files are prepared (word2vec text becomes id files
    // after a vocabulary pass), so it is read first; a saved model carries its own.
    let (config, saved, done) = match (&args.config, &args.resume) {
        (Some(path), None) => (ModelConfig::from_file(path)?, None, 0),
        (None, Some(path)) => {
            let (config, model, done) = crate::models::load_trained(path)?;
            (config, Some(model), done)
        }
        _ => bail!("give --config (a new model) or --resume (a saved one)"),
    };
    let metric = match args.validation.is_empty() {
        true => None,
        false => Some(validation_metric(&config)?),
    };
    config.check_desc(&desc, true).map_err(|e| {
        let model = args.config.as_ref().or(args.resume.as_ref());
        anyhow!(
            "--feed {} does not fit the model of {}: {e}",
            args.feed.display(),
            model.map_or("".into(), |p| p.display().to_string())
        )
    })?;
    // A slot the model does not read trains as if absent: said, since it is rarely meant.
    let model_path = args.config.as_ref().or(args.resume.as_ref());
    for note in config.unread_slots(&desc)? {
        eprintln!(
            "warning: {} with --feed {}: {note}",
            model_path.map_or("".into(), |p| p.display().to_string()),
            args.feed.display()
        );
    }
    let tune = match args.budget {
        Some(_) => autotune::check(&config, &args.tune)?,
        None => Vec::new(),
    };
    let label_file = match &args.labels {
        Some(path) => Some(labels::read_labels(path, &config)?),
        None => None,
    };
    // A saved model keeps its counts (its tree is trained); a new one takes those of --labels.
    let counts = match &saved {
        Some(_) => None,
        None => labels::counts_for_new(&config, args.labels.as_deref().zip(label_file.as_ref()))?,
    };
    let names = label_file.map(|l| l.names);
    if let (Some(path), Some(new), Some(old)) = (
        &args.labels,
        &names,
        saved
            .as_ref()
            .and_then(AnyModel::labels)
            .and_then(|l| l.names()),
    ) {
        if let Some(id) = (0..old.len()).find(|&id| new[id] != old[id]) {
            bail!(
                "--labels {}: label {id} is {} there, but {} names it {}: a saved model keeps \
                 the names it was trained with",
                path.display(),
                new[id],
                args.resume.as_deref().unwrap_or(Path::new("")).display(),
                old[id]
            );
        }
    }
    paths::stdin_once(
        args.files
            .iter()
            .chain(&args.test)
            .chain(&args.validation)
            .map(String::as_str),
    )?;
    let given = expand_files(&args.files)?;
    paths::check_inputs("data file", given.iter().map(PathBuf::as_path))?;
    let test = if args.test.is_empty() {
        Vec::new()
    } else {
        let test = expand_files(&args.test).map_err(|e| anyhow!("--test {e:#}"))?;
        paths::check_inputs("--test file", test.iter().map(PathBuf::as_path))?;
        test
    };
    let validation = if args.validation.is_empty() {
        Vec::new()
    } else {
        let files = expand_files(&args.validation).map_err(|e| anyhow!("--validation {e:#}"))?;
        paths::check_inputs("--validation file", files.iter().map(PathBuf::as_path))?;
        files
    };
    if let Some(save) = &args.save {
        let inputs = [
            args.config.as_deref(),
            Some(args.feed.as_path()),
            args.labels.as_deref(),
        ];
        paths::refuse_overwrite(
            save,
            "--save",
            inputs.into_iter().flatten().chain(
                given
                    .iter()
                    .chain(&test)
                    .chain(&validation)
                    .map(PathBuf::as_path),
            ),
        )?;
    }
    let stop = interrupt::install()?;
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
    let mut options = args.report.options();
    options.stop = stop.clone();
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
    options.feed.line_prefix = args.prefix.prefix();
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
    if let (Some(budget), Some(data)) = (args.budget, &data) {
        let model = autotune::Search {
            config: &config,
            desc: &desc,
            data,
            validation: &validation,
            metric: metric.unwrap_or("accuracy"),
            names,
            counts,
            epochs: args.epochs,
            threads,
            budget: Duration::from_secs_f64(budget),
            tune,
            save: args.save.clone(),
            seed: args.shuffle_seed,
            verbose: !args.report.quiet,
            options,
        }
        .run()?;
        return test_model(&args, &config, &desc, &model, test, threads, stop);
    }
    let mut model = match saved {
        Some(model) => model,
        None => {
            let model = AnyModel::new(&config, prepared.vocab.take())?;
            with_model!(&model, m => executor::startup(m));
            model
        }
    };
    if let (Some(names), Some(labels)) = (names, model.labels_mut()) {
        labels.set_names(names)?;
    }
    if let Some(counts) = counts {
        model.set_label_counts(counts)?;
    }
    let ready = started.elapsed();
    let verbose = !args.report.quiet;
    let saves = Mutex::new(Saves {
        last: Instant::now(),
        epoch: None,
        took: Duration::ZERO,
    });
    let save = |path: &Path, epoch: usize| -> Result<()> {
        let t0 = Instant::now();
        let stale = model.save(path, done + epoch)?;
        if !stale.is_empty() {
            println!("{stale}");
        }
        let mut s = saves.lock().unwrap_or_else(|p| p.into_inner());
        s.took += t0.elapsed();
        s.last = Instant::now();
        s.epoch = Some(epoch);
        Ok(())
    };
    let call = |e: &EpochReport| -> hogwild::Result<()> {
        if verbose {
            // A resumed model's epochs are numbered after those it was trained for.
            let numbered = EpochReport {
                epoch: done + e.epoch,
                ..e.clone()
            };
            println!("{}", numbered.line(threads));
        }
        let since = saves
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last
            .elapsed();
        let due = e.epoch == args.epochs || since.as_secs_f64() >= args.save_every;
        if let Some(path) = args.save.as_ref().filter(|_| due) {
            save(path, e.epoch).map_err(|err| hogwild::Error::Checkpoint {
                path: path.display().to_string(),
                reason: format!("{err:#}"),
            })?;
            println!("saved {} (epoch {})", path.display(), done + e.epoch);
        }
        Ok(())
    };
    // With --validation, the model of the best epoch (reloaded from --save when a later epoch
    // was worse), which the test files evaluate.
    let mut best_model = None;
    let report = match (metric, &args.save) {
        (Some(metric), Some(path)) => {
            let validation = prepare_inputs(&config, &desc, validation, Purpose::Eval(&model))?;
            let run = Validated {
                args: &args,
                model: &model,
                desc: &desc,
                data: data.as_ref(),
                files: &prepared.files,
                validation: &validation.files,
                metric,
                threads,
                done,
                options: &options,
            };
            let (report, best) = run.train(path, |epoch| save(path, epoch))?;
            if best < report.epochs.len() && !test.is_empty() {
                best_model = Some(crate::models::load(path)?.1);
            }
            report
        }
        _ => match &data {
            Some(data) => with_model!(&model, m =>
                Run::new(m, &desc).threads(threads).options(&options).on_epoch(&call).train_dataset(data)),
            // One run streams every epoch: the feed re-reads the files, nothing is held.
            None => with_model!(&model, m =>
                Run::new(m, &desc).threads(threads).options(&options).on_epoch(&call).train(&prepared.files)),
        }
        .context("training")?,
    };
    let model = best_model.as_ref().unwrap_or(&model);
    if args.stream {
        args.bad_lines.warn_skipped("training files", &report.feed);
    }
    if report.stopped {
        let saved_epoch = saves.lock().unwrap_or_else(|p| p.into_inner()).epoch;
        return stopped(&args, &report, done, saved_epoch, |path, epoch| {
            save(path, epoch)
        });
    }
    let trained = started.elapsed();
    let saving = saves.lock().unwrap_or_else(|p| p.into_inner()).took;
    if verbose {
        // Saves happen between epochs, inside the run: their time is shown apart from training's.
        print!(
            "time: load {:.3}s, model init {:.3}s, training {:.3}s",
            loaded.as_secs_f64(),
            (ready - loaded).as_secs_f64(),
            (trained - ready).saturating_sub(saving).as_secs_f64(),
        );
        if args.save.is_some() {
            print!(", saving {:.3}s", saving.as_secs_f64());
        }
        println!(", total {:.3}s", trained.as_secs_f64());
        println!("feed: {}", report.feed);
        println!(
            "memory: parameters and optimizer state {:.1} MiB, data {:.1} MiB ({})",
            model.memory_bytes() as f64 / (1 << 20) as f64,
            report.data_bytes as f64 / (1 << 20) as f64,
            if args.stream {
                "feed queues, peak of one queue x threads"
            } else {
                "in-memory dataset, instance orders and what the model keeps of the records"
            }
        );
    }
    test_model(
        &args,
        &config,
        &desc,
        model,
        test,
        threads,
        options.stop.clone(),
    )
}

/// `--test`: evaluates the trained model on the test files, if any.
fn test_model(
    args: &Args,
    config: &ModelConfig,
    desc: &DataFeedDesc,
    model: &AnyModel,
    test: Vec<PathBuf>,
    threads: usize,
    stop: Stop,
) -> Result<()> {
    if test.is_empty() {
        return Ok(());
    }
    let test = prepare_inputs(config, desc, test, Purpose::Eval(model))?;
    let mut eval = args.report.options();
    eval.stop = stop;
    eval.feed.errors = args.bad_lines.policy();
    eval.feed.line_prefix = args.prefix.prefix();
    let report = with_model!(model, m =>
        Run::new(m, desc).threads(threads).options(&eval).eval(&test.files))
    .context("evaluating on the test files")?;
    args.bad_lines.warn_skipped("test files", &report.feed);
    println!("{}", crate::eval::test_line(&report));
    Ok(())
}

/// The metric `--validation` watches for `config`'s model (higher is better): the AUC of the CTR
/// models, the accuracy of bag-of-words ones.
fn validation_metric(config: &ModelConfig) -> Result<&'static str> {
    match &config.model {
        ModelKind::Lr(_) | ModelKind::Fm(_) | ModelKind::Ffm(_) => Ok("auc"),
        ModelKind::Bow(_) => Ok("accuracy"),
        ModelKind::Word2vec(_) => bail!(
            "--validation: a word2vec model has no label to validate against (it works for lr, \
             fm, ffm and bow models)"
        ),
    }
}

/// A `--validation` run: one executor run per epoch, each followed by an evaluation of the
/// validation files.
struct Validated<'a> {
    args: &'a Args,
    model: &'a AnyModel,
    desc: &'a DataFeedDesc,
    data: Option<&'a InMemoryDataset>,
    files: &'a [PathBuf],
    validation: &'a [PathBuf],
    metric: &'static str,
    threads: usize,
    /// The epochs a resumed model was trained for.
    done: usize,
    options: &'a RunOptions,
}

impl Validated<'_> {
    /// Trains the epochs, saving the model with `save` (given this run's epoch) whenever an
    /// epoch's validation metric is the best so far, and stopping early as `--early-stop`
    /// says. Returns the runs' report (their epochs in order) and the best epoch.
    fn train(&self, path: &Path, save: impl Fn(usize) -> Result<()>) -> Result<(RunReport, usize)> {
        let (args, threads, metric) = (self.args, self.threads, self.metric);
        let mut eval = args.report.options();
        eval.progress = Progress::Quiet;
        eval.print_period = 0;
        eval.stop = self.options.stop.clone();
        eval.feed.errors = args.bad_lines.policy();
        eval.feed.line_prefix = args.prefix.prefix();
        let mut total: Option<RunReport> = None;
        let mut best: Option<(usize, f64)> = None;
        for epoch in 1..=args.epochs {
            let mut one = self.options.clone();
            one.feed.epochs = 1;
            // The learning rate decays over all the run's epochs, not to zero in each.
            one.span = Some(Span {
                before: epoch - 1,
                total: args.epochs,
            });
            if let FeedMode::InMemory {
                shuffle: Some(seed),
            } = one.feed.mode
            {
                let mixed = seed ^ ((self.done + epoch) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                one.feed.mode = FeedMode::InMemory {
                    shuffle: Some(mixed),
                };
            }
            let report = match self.data {
                Some(data) => with_model!(self.model, m =>
                    Run::new(m, self.desc).threads(threads).options(&one).train_dataset(data)),
                None => with_model!(self.model, m =>
                    Run::new(m, self.desc).threads(threads).options(&one).train(self.files)),
            }
            .context("training")?;
            if report.stopped {
                match best {
                    Some((b, value)) => println!(
                        "{} holds epoch {} (validation {metric} {value:.5}); the epoch stopped \
                         is not saved",
                        path.display(),
                        self.done + b
                    ),
                    None => println!("nothing saved: no epoch finished"),
                }
                bail!(
                    "training stopped by {}",
                    interrupt::received().unwrap_or("a stop request")
                );
            }
            let checked = with_model!(self.model, m =>
                Run::new(m, self.desc).threads(threads).options(&eval).eval(self.validation))
            .context("evaluating on the validation files")?;
            if epoch == 1 {
                args.bad_lines
                    .warn_skipped("validation files", &checked.feed);
            }
            let Some(value) = checked.get(metric) else {
                let why = checked.unavailable.iter().find(|(n, _)| n == metric);
                bail!(
                    "--validation: no {metric} after epoch {}: {}",
                    self.done + epoch,
                    why.map_or("the model did not report it", |(_, r)| r.as_str())
                );
            };
            let mut line = match report.epochs.first() {
                Some(e) => EpochReport {
                    epoch: self.done + epoch,
                    ..e.clone()
                }
                .line(threads),
                None => format!("epoch {}: no instance", self.done + epoch),
            };
            line.push_str(&format!("  validation {metric} {value:.5}"));
            if let Some(loss) = checked.get("loss") {
                line.push_str(&format!("  validation loss {loss:.5}"));
            }
            if !args.report.quiet {
                println!("{line}");
            }
            total = Some(match total {
                None => report,
                Some(t) => t.then(report),
            });
            if best.is_none_or(|(_, b)| value > b) {
                best = Some((epoch, value));
                save(epoch)?;
                println!(
                    "saved {} (epoch {}, the best so far: validation {metric} {value:.5})",
                    path.display(),
                    self.done + epoch
                );
            } else if let (Some(n), Some((b, value))) = (args.early_stop, best) {
                if epoch - b >= n {
                    println!(
                        "early stop after epoch {}: validation {metric} has not improved for \
                         {n} epoch{} ({value:.5} at epoch {})",
                        self.done + epoch,
                        if n == 1 { "" } else { "s" },
                        self.done + b
                    );
                    break;
                }
            }
        }
        let (Some(total), Some((b, value))) = (total, best) else {
            bail!("--validation: no epoch was trained");
        };
        println!(
            "{} holds epoch {} of {}, the best on validation ({metric} {value:.5})",
            path.display(),
            self.done + b,
            self.done + total.epochs.len()
        );
        Ok((total, b))
    }
}

/// The saves of a training run: when the last was made and of which epoch (of this run), and
/// the time they took.
struct Saves {
    last: Instant,
    epoch: Option<usize>,
    took: Duration,
}

/// The end of a run stopped by a signal: saves what it trained when `--save` is given (unless
/// the last save holds it already) and says what was kept; the command then fails, so that the
/// process exits with the signal's status.
fn stopped(
    args: &Args,
    report: &RunReport,
    done: usize,
    saved_epoch: Option<usize>,
    save: impl Fn(&Path, usize) -> Result<()>,
) -> Result<()> {
    let epochs = report.epochs.len();
    let partial = report.instances - report.epochs.iter().map(|e| e.instances).sum::<u64>();
    // Numbered as the epoch lines are: a resumed model's after those it was trained for.
    let all = done + epochs;
    let mut trained = format!("{all} epoch{}", if all == 1 { "" } else { "s" });
    if partial > 0 {
        trained.push_str(&format!(
            " and {partial} instance{} of epoch {}",
            if partial == 1 { "" } else { "s" },
            all + 1
        ));
    }
    match &args.save {
        None => println!("not saved (no --save): {trained} trained"),
        Some(path) if report.instances == 0 => {
            println!("nothing trained: {} not written", path.display())
        }
        Some(path) if partial == 0 && saved_epoch == Some(epochs) => {
            println!("{} holds {trained} trained already", path.display())
        }
        Some(path) => {
            save(path, epochs).with_context(|| format!("saving {}", path.display()))?;
            println!(
                "saved {}: {trained} trained (continue with --resume {})",
                path.display(),
                path.display()
            );
        }
    }
    bail!(
        "training stopped by {}",
        interrupt::received().unwrap_or("a stop request")
    )
}

/// `--early-stop`'s number of epochs without improvement: 1 or more.
fn parse_patience(text: &str) -> std::result::Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 would stop before any epoch could improve: give 1 or more".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("\"{text}\" is not a number of epochs: {e}")),
    }
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
