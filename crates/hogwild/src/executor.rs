//! The asynchronous executor: trains one shared model in several threads from files (Paddle's
//! `AsyncExecutor.run_from_files`), and evaluates or predicts with the same machinery.
//!
//! Every run goes through one worker loop (`run.rs`) over a batch source: the streaming feed,
//! which gives every worker thread its own queue of batches (a worker whose queue is empty takes
//! from the others', so a slow worker holds up no batches) and re-reads the files every epoch; an
//! in-memory dataset loaded once and shuffled every epoch ([`FeedMode::InMemory`]); or, for
//! predictions, files read in order. Workers share the model's parameters without locks (the
//! Hogwild store); each keeps its own scratch buffers and computes single-threaded. The model's
//! metrics are averaged over all instances of all threads, per epoch and over the run; an epoch
//! hook runs as each epoch ends, in order. Every `print_period` batches the executor prints the
//! step, the elapsed time, instances/s and the metrics averaged since the previous line (an
//! `indicatif` spinner on a terminal, plain lines otherwise). A worker that fails or panics stops
//! the source and the other workers, and the run returns its error. A [`Stop`] request (Ctrl-C)
//! stops them too, after their current batch: a training run then returns what it trained
//! ([`RunReport::stopped`]), an evaluation [`Error::Stopped`]. However a worker's thread
//! ends, the executor flushes it ([`Model::flush`]) so that what it trained is in the shared
//! tables when the run returns.
//!
//! ```no_run
//! use hogwild::executor::{self, Run};
//! use hogwild::feed::DataFeedDesc;
//! use hogwild::models::{Bow, BowConfig};
//! use hogwild::optim::AdamAsync;
//!
//! # fn main() -> hogwild::Result<()> {
//! let desc = DataFeedDesc::from_file("data.prototxt".as_ref())?;
//! let cfg = BowConfig { vocab: 30_000, classes: 2, bigram_buckets: 1 << 20, ..BowConfig::default() };
//! let model = Bow::new(cfg, AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8))?;
//! executor::startup(&model);
//! let report = Run::new(&model, &desc).threads(4).train(&["part-0", "part-1"])?;
//! println!("mean loss {}", report.get("loss").unwrap());
//! # Ok(()) }
//! //! ```

mod report;
mod run;
mod sources;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use report::{LocalWindow, Progress, Reporter};

use crate::feed::{
    count_instances, DataFeedDesc, FeedMode, FeedOptions, FeedStats, InMemoryDataset,
};
use crate::files::Output;
use crate::model::{Model, StageTimes};
use crate::{Error, Result};
pub use run::MAX_THREADS;
use run::{check_threads, Spec};
use sources::{InOrder, Memory, Stream};

/// How a run reports and reads. [`RunOptions::default`] prints a progress line every 100
/// batches ([`Progress::Auto`]: a spinner on a terminal, plain lines otherwise), measures no
/// stage times, reads with [`FeedOptions::default`] (one epoch, streamed) and runs to its end:
///
/// ```
/// use hogwild::executor::RunOptions;
/// use hogwild::feed::{FeedMode, FeedOptions};
///
/// let options = RunOptions {
///     print_period: 0, // quiet
///     feed: FeedOptions { epochs: 5, mode: FeedMode::InMemory { shuffle: Some(1) }, ..FeedOptions::default() },
///     ..RunOptions::default()
/// };
/// assert!(options.span.is_none());
/// ```
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Print a line every this many batches (all threads together); 0 prints nothing. Default
    /// 100.
    pub print_period: usize,
    /// Where and how progress is shown. Default [`Progress::Auto`].
    pub progress: Progress,
    /// Measure and print per-stage times (read, forward, backward, update). Default off.
    pub debug: bool,
    /// The data feed's options; its thread count is set to the run's. `feed.epochs` passes are made
    /// in one run; `feed.mode` says whether training streams the files or loads them once.
    /// Default [`FeedOptions::default`].
    pub feed: FeedOptions,
    /// Asks the run to stop early (see [`Stop`]); by default nothing does.
    pub stop: Stop,
    /// Where a training run sits in a longer schedule (see [`Span`]); `None` (the default): the
    /// run is the whole schedule.
    pub span: Option<Span>,
}

/// A training run that is part of a longer one, for the models whose learning rate follows the
/// run's progress: it trains epochs `before + 1 ..= before + feed.epochs` of a schedule of
/// `total` epochs (a run per epoch, with an evaluation between them, decays the rate over all of
/// them and not to zero in each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Epochs of the schedule trained before this run.
    pub before: usize,
    /// Epochs of the whole schedule.
    pub total: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            print_period: 100,
            progress: Progress::Auto,
            debug: false,
            feed: FeedOptions::default(),
            stop: Stop::default(),
            span: None,
        }
    }
}

/// A request to stop a run before its end, which any thread (a signal handler's included) may
/// make: a clone shares the request. The run's workers finish the batch they hold, hand what
/// they trained to the shared tables ([`Model::flush`]) and end; an epoch they complete on the
/// way is still reported (and its hook called). A training run then returns its report with
/// [`RunReport::stopped`] set: the model holds every batch trained, and the report counts them
/// (the epochs completed in [`RunReport::epochs`], the instances of all in
/// [`RunReport::instances`]). An evaluation or prediction run returns [`Error::Stopped`]: metrics
/// of a part of the data are no result. A request made before a run starts stops it before its
/// first batch; a request stays made for every later run that shares it.
///
/// ```
/// use hogwild::executor::Stop;
///
/// let stop = Stop::default();
/// let handler = stop.clone(); // e.g. moved into a Ctrl-C handler
/// handler.request();
/// assert!(stop.requested());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A request that `flag` becoming true makes, for code that sets a flag of its own (the
    /// `signal-hook` crate's `flag::register`).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Self {
        Self(flag)
    }

    /// Asks every run that shares this request to stop.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was requested.
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The metrics of one epoch of a run, reported when its last batch is counted.
#[derive(Debug, Clone)]
pub struct EpochReport {
    /// 1-based.
    pub epoch: usize,
    /// Every metric the model reports (and `auc` when it collects scores), the mean over the
    /// epoch's instances; then the model's run metrics ([`Model::run_metrics`]) gathered since the
    /// previous epoch's report.
    pub fetched: Vec<(String, f64)>,
    /// Instances trained in the epoch, by all threads.
    pub instances: u64,
    /// Time from the start of the run to the end of this epoch.
    pub elapsed: Duration,
    /// Time from the previous epoch's end (the run's start, for the first) to this one's.
    pub took: Duration,
    /// The metrics the model collects that this epoch could not give, each with the reason
    /// (`auc` over instances of one class).
    pub unavailable: Vec<(String, String)>,
}

impl EpochReport {
    /// The value called `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.fetched.iter().find(|(n, _)| n == name).map(|x| x.1)
    }

    /// The line `hogwild train` and `hogwild tf-train` print for an epoch:
    /// `epoch E: N instances in S s (R/s, T threads)  name value ...`.
    /// An epoch shorter than a millisecond (the precision of the time shown) has no measured
    /// rate: `-/s`.
    pub fn line(&self, threads: usize) -> String {
        let secs = self.took.as_secs_f64();
        let rate = if secs < 1e-3 {
            "-".to_string()
        } else {
            format!("{:.0}", self.instances as f64 / secs)
        };
        let mut line = format!(
            "epoch {}: {} instances in {secs:.3}s ({rate}/s, {threads} thread{})",
            self.epoch,
            self.instances,
            if threads == 1 { "" } else { "s" }
        );
        for (name, value) in &self.fetched {
            line.push_str(&format!("  {name} {value:.5}"));
        }
        line
    }
}

/// Called once per finished epoch, in order, from the worker thread that counted the epoch's last
/// batch (the others may already be training the next epoch). An error stops the run.
pub type EpochHook<'a> = dyn Fn(&EpochReport) -> Result<()> + Sync + 'a;

/// What a run returns.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The fetched metrics, in the order asked, each the mean over every instance of every
    /// thread (each batch's value weighted by its instances);
    /// then `auc`, exact over every instance of the run's last epoch, when the model collects
    /// scores; then the model's run metrics ([`Model::run_metrics`]) over the whole run (the sum
    /// of the epochs' values).
    pub fetched: Vec<(String, f64)>,
    /// Batches run, by all threads.
    pub batches: u64,
    /// Instances run, by all threads.
    pub instances: u64,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// Per-stage times summed over threads (debug mode only).
    pub stages: Option<StageTimes>,
    /// The feed's counters. For in-memory runs: lines, bytes and read time of the load, and as
    /// `worker_wait` the time workers spent gathering their batches from memory.
    pub feed: FeedStats,
    /// One report per epoch, in order.
    pub epochs: Vec<EpochReport>,
    /// Bytes of data held besides the model: the in-memory dataset, the workers' instance
    /// orders and what the model kept of the records ([`Model::prepare_dataset`]), or the most the feed's queues held (streaming; the peak of one queue times the
    /// number of workers).
    pub data_bytes: usize,
    /// The run was stopped on request ([`RunOptions::stop`]) before the end of its epochs: the
    /// report holds what was trained until then.
    pub stopped: bool,
    /// The fetched metrics the run could not give, each with the reason (`auc` of the last
    /// epoch over instances of one class).
    pub unavailable: Vec<(String, String)>,
}

impl RunReport {
    /// The fetched value called `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.fetched.iter().find(|(n, _)| n == name).map(|x| x.1)
    }

    /// This run's report followed by that of `next`, a run of the epochs after this one's (a
    /// training made of one run per epoch): batches, instances, times and the feed's delivered
    /// counts and waits are summed, `next`'s epochs are numbered after this run's; the metrics
    /// and everything else are `next`'s.
    pub fn then(self, mut next: RunReport) -> RunReport {
        let before = self.epochs.len();
        for e in &mut next.epochs {
            e.epoch += before;
            e.elapsed += self.elapsed;
        }
        let mut epochs = self.epochs;
        epochs.append(&mut next.epochs);
        next.feed.instances += self.feed.instances;
        next.feed.batches += self.feed.batches;
        next.feed.worker_wait += self.feed.worker_wait;
        next.feed.elapsed += self.feed.elapsed;
        RunReport {
            batches: self.batches + next.batches,
            instances: self.instances + next.instances,
            elapsed: self.elapsed + next.elapsed,
            epochs,
            ..next
        }
    }

    /// Instances per second over the run.
    pub fn instances_per_sec(&self) -> f64 {
        self.instances as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A run of a model over data laid out by a desc: training, evaluation or prediction, set up
/// with builder calls and done by its last call ([`Run::train`], [`Run::train_dataset`],
/// [`Run::eval`], [`Run::predict`]). By default it runs on every core ([`default_threads`]),
/// fetches every metric the model reports, with [`RunOptions::default`] and no epoch hook.
///
/// ```no_run
/// # use hogwild::{executor::{Run, RunOptions}, feed::DataFeedDesc, models::{Bow, BowConfig}, optim::Sgd};
/// # fn main() -> hogwild::Result<()> {
/// # let desc = DataFeedDesc::from_file("data.prototxt".as_ref())?;
/// # let model = Bow::new(BowConfig { vocab: 10, classes: 2, ..BowConfig::default() }, Sgd { lr: 0.1f32 })?;
/// let quiet = RunOptions { print_period: 0, ..RunOptions::default() };
/// let hook = |e: &hogwild::executor::EpochReport| { println!("{}", e.line(2)); Ok(()) };
/// let report = Run::new(&model, &desc).threads(2).options(&quiet).on_epoch(&hook).train(&["train.txt"])?;
/// let test = Run::new(&model, &desc).fetch(&["accuracy"]).eval(&["test.txt"])?;
/// println!("{} instances, accuracy {:?}", report.instances, test.get("accuracy"));
/// # Ok(()) }
/// ```
pub struct Run<'a, M> {
    model: &'a M,
    desc: &'a DataFeedDesc,
    threads: usize,
    fetch: &'a [&'a str],
    options: Option<&'a RunOptions>,
    on_epoch: Option<&'a EpochHook<'a>>,
}

/// The number of threads a [`Run`] uses unless told: every core (at most [`MAX_THREADS`]).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS))
}

impl<'a, M: Model> Run<'a, M> {
    /// A run of `model` over data laid out by `desc`.
    pub fn new(model: &'a M, desc: &'a DataFeedDesc) -> Self {
        Self {
            model,
            desc,
            threads: default_threads(),
            fetch: &[],
            options: None,
            on_epoch: None,
        }
    }

    /// Runs `threads` worker threads (1 to [`MAX_THREADS`]).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Returns these metrics, in this order (an unknown name fails the run before it starts);
    /// by default every metric the model reports.
    pub fn fetch(mut self, names: &'a [&'a str]) -> Self {
        self.fetch = names;
        self
    }

    /// Reports and reads as `options` says (epochs, in-memory or streamed data, progress).
    pub fn options(mut self, options: &'a RunOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Calls `hook` once per finished training epoch, in order (see [`EpochHook`]).
    pub fn on_epoch(mut self, hook: &'a EpochHook<'a>) -> Self {
        self.on_epoch = Some(hook);
        self
    }

    /// Trains the model on `files` for `options.feed.epochs` passes: loaded once with
    /// [`FeedMode::InMemory`], streamed (re-read every epoch) otherwise.
    pub fn train<P: AsRef<Path>>(self, files: &[P]) -> Result<RunReport> {
        let default = RunOptions::default();
        let files = paths(files);
        let options = self.options.unwrap_or(&default);
        run_from_files(
            self.model,
            self.desc,
            &files,
            self.threads,
            self.fetch,
            options,
            self.on_epoch,
        )
    }

    /// Trains the model on `data`, a dataset loaded into memory ([`InMemoryDataset::load`]),
    /// for `options.feed.epochs` epochs. [`FeedMode::InMemory`]'s seed shuffles the instances
    /// (file order without one); `options.feed.batch_size` overrides the desc's. The same seed
    /// and thread count give the same batches, whichever thread trains them.
    pub fn train_dataset(self, data: &InMemoryDataset) -> Result<RunReport> {
        let default = RunOptions::default();
        let options = self.options.unwrap_or(&default);
        train_dataset(
            self.model,
            self.desc,
            data,
            self.threads,
            self.fetch,
            options,
            self.on_epoch,
        )
    }

    /// Evaluates the model on `files` without changing it: the metrics over every instance.
    pub fn eval<P: AsRef<Path>>(self, files: &[P]) -> Result<RunReport> {
        self.evaluate(files, None)
    }

    /// Writes the model's prediction for every instance of `files` to `out`, one line each, in
    /// input order whatever the thread count (each file is loaded into memory in turn and its
    /// batches shared by the threads); commit `out` ([`Output::commit`]) once this succeeded: a
    /// file output dropped uncommitted leaves its target as it was.
    pub fn predict<P: AsRef<Path>>(self, files: &[P], out: &mut Output) -> Result<RunReport> {
        self.evaluate(files, Some(out))
    }

    /// `eval` and `predict`: one pass without training, the predictions to `out` when given.
    fn evaluate<P: AsRef<Path>>(self, files: &[P], out: Option<&mut Output>) -> Result<RunReport> {
        let default = RunOptions::default();
        let options = self.options.unwrap_or(&default);
        eval_from_files(
            self.model,
            self.desc,
            &paths(files),
            self.threads,
            self.fetch,
            options,
            out,
        )
    }
}

fn paths<P: AsRef<Path>>(files: &[P]) -> Vec<PathBuf> {
    files.iter().map(|f| f.as_ref().to_path_buf()).collect()
}

/// The startup step, run once on a fresh model before its first training run (Paddle's startup
/// program): initialises the parameters. A model loaded from a checkpoint skips it.
pub fn startup<M: Model>(model: &M) {
    model.startup();
}

/// Trains `model` in `threads` worker threads on `files` read as `desc` says, for
/// `options.feed.epochs` passes. `fetch` names the metrics to return (empty: all the model
/// reports). With [`FeedMode::InMemory`] the files are loaded once and the run is
/// [`train_dataset`]'s; otherwise the feed streams them, re-reading them every epoch.
/// `on_epoch` is called once per finished epoch, in order (see [`EpochHook`]).
pub(crate) fn run_from_files<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    on_epoch: Option<&EpochHook<'_>>,
) -> Result<RunReport> {
    check_threads(threads)?;
    let spec = Spec {
        train: true,
        fetch,
        options,
        on_epoch,
    };
    // The model reads the desc before any file is: a slot it cannot use fails at once.
    let workers = model.workers(desc, threads)?;
    match options.feed.mode {
        FeedMode::InMemory { .. } => {
            if files.is_empty() {
                return Err(Error::Empty {
                    what: "data file list",
                });
            }
            let mut load = options.feed.clone();
            load.threads = threads;
            let data = InMemoryDataset::load(desc, files, &load)?;
            in_memory(model, workers, desc, &data, &spec)
        }
        FeedMode::Stream => streaming(model, workers, desc, files, &spec),
    }
}

/// Trains `model` on `data` (laid out by `desc`) for `options.feed.epochs` epochs in `threads`
/// worker threads (see the in-memory source in `executor/sources.rs`). [`FeedMode::InMemory`]'s
/// seed shuffles the instances (file order without one, or in stream mode);
/// `options.feed.batch_size` overrides the desc's. The same seed and thread count give the same
/// batches (whichever thread trains them). `on_epoch` is called once per finished epoch, in
/// order (see [`EpochHook`]); the report lists every epoch's metrics.
pub(crate) fn train_dataset<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    data: &InMemoryDataset,
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    on_epoch: Option<&EpochHook<'_>>,
) -> Result<RunReport> {
    check_threads(threads)?;
    let workers = model.workers(desc, threads)?;
    let spec = Spec {
        train: true,
        fetch,
        options,
        on_epoch,
    };
    in_memory(model, workers, desc, data, &spec)
}

/// Evaluates `model` on `files` without changing it. With `predictions`, writes one line per
/// instance to that output **in input order** whatever the thread count: each file is loaded
/// into memory in turn, its batches are shared by the threads, and a reorder buffer writes them
/// in sequence (so memory holds one file at a time). The caller commits the output once the run
/// succeeded ([`Output::commit`]); a file output dropped uncommitted leaves its target as it
/// was. Without, the feed streams the files.
pub(crate) fn eval_from_files<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    predictions: Option<&mut Output>,
) -> Result<RunReport> {
    check_threads(threads)?;
    let mut once = options.clone();
    once.feed.epochs = 1;
    let spec = Spec {
        train: false,
        fetch,
        options: &once,
        on_epoch: None,
    };
    let workers = model.workers(desc, threads)?;
    let Some(out) = predictions else {
        // Metrics are measured against labels: without them, or without an instance, there is
        // nothing to report (not a loss of 0 or NaN).
        model.check_metrics_desc(desc)?;
        let report = streaming(model, workers, desc, files, &spec)
            .and_then(|r| complete(r, "evaluation"))?;
        if report.instances == 0 {
            return Err(Error::Empty {
                what: "evaluation data",
            });
        }
        return Ok(report);
    };
    let source = InOrder::new(desc, files, &once.feed, threads, out)?;
    // A stopped run is an error before the source finishes: the predictions are not whole.
    let report =
        run::run(model, workers, desc, &source, &spec).and_then(|r| complete(r, "prediction"));
    let (loaded, data_bytes) = source.finish()?;
    let mut report = report?;
    report.feed = FeedStats {
        lines: loaded.lines,
        bytes: loaded.bytes,
        bad_lines: loaded.bad_lines,
        bad_examples: loaded.bad_examples,
        pipe_stderr: loaded.pipe_stderr,
        read_time: loaded.read_time,
        ..report.feed
    };
    report.data_bytes = data_bytes;
    Ok(report)
}

/// The report of `what` (an evaluation run), when the run went through all its data.
fn complete(report: RunReport, what: &'static str) -> Result<RunReport> {
    if report.stopped {
        return Err(Error::Stopped { what });
    }
    Ok(report)
}

/// A training run over an in-memory dataset, one worker per thread.
fn in_memory<M: Model>(
    model: &M,
    workers: Vec<M::Worker>,
    desc: &DataFeedDesc,
    data: &InMemoryDataset,
    spec: &Spec<'_>,
) -> Result<RunReport> {
    let feed = &spec.options.feed;
    let seed = match feed.mode {
        FeedMode::InMemory { shuffle } => shuffle,
        FeedMode::Stream => None,
    };
    let count = || Ok(data.len() as u64);
    model.plan(&spec.plan(&count))?;
    let mut source = Memory::new(
        data,
        workers.len(),
        spec.epochs(),
        feed.batch_size(desc),
        seed,
    )?;
    // A single pass reads each record once anyway: preparing it would only add a copy.
    let prepared = match spec.epochs() > 1 {
        true => model.prepare_dataset(desc, data, workers.len())?,
        false => None,
    };
    if prepared.is_some() {
        source.refer_only();
    }
    let report = run::run(model, workers, desc, &source, spec);
    model.release_dataset();
    let mut report = report?;
    let load = data.load_stats();
    report.feed = FeedStats {
        lines: load.lines,
        bytes: load.bytes,
        bad_lines: load.bad_lines,
        bad_examples: load.bad_examples.clone(),
        pipe_stderr: load.pipe_stderr.clone(),
        read_time: load.read_time,
        ..report.feed
    };
    report.data_bytes = data.byte_size() + source.order_bytes() + prepared.unwrap_or(0);
    Ok(report)
}

/// A run over the streaming feed, one worker per thread: training (which first counts the
/// files' instances if the model's schedule needs them) or evaluation.
fn streaming<M: Model>(
    model: &M,
    workers: Vec<M::Worker>,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    spec: &Spec<'_>,
) -> Result<RunReport> {
    if spec.train {
        let count = || count_instances(desc, files);
        model.plan(&spec.plan(&count))?;
    }
    let threads = workers.len();
    let source = Stream::start(desc, files, &spec.options.feed, threads)?;
    let report = run::run(model, workers, desc, &source, spec);
    // A worker's failure stops the feed, so it comes first; a reader's error (a bad line) ends
    // the queues early, so a run whose workers all finished still fails with it.
    let feed = source.finish();
    let mut report = report?;
    let feed = feed?;
    if spec.train && report.instances == 0 && !report.stopped {
        // As an empty in-memory dataset is refused: a run that trained nothing is no success.
        return Err(Error::Empty {
            what: "training data",
        });
    }
    report.data_bytes = feed.peak_queue_bytes * threads;
    report.feed = feed;
    Ok(report)
}

#[cfg(test)]
mod tests;
