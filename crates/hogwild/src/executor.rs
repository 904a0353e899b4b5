//! The asynchronous executor: trains one shared model in several threads from files (Paddle's
//! `AsyncExecutor.run_from_files`), and evaluates or predicts with the same machinery.
//!
//! A run starts the data feed, which gives every worker thread its own queue of batches, and runs
//! one worker per queue (a worker whose queue is empty takes from the others', so a slow worker
//! holds up no batches). Workers share the model's parameters without locks (the Hogwild store);
//! each keeps its own scratch buffers and computes single-threaded. The model's metrics are averaged
//! over all instances of all threads and returned; every `print_period` batches the executor prints
//! the step, the elapsed time, instances/s and the metrics averaged since the previous line (an
//! `indicatif` spinner on a terminal, plain lines otherwise; other runners of batches in threads
//! print the same way through [`Reporter`]). A worker that fails or panics stops the feed and the
//! other workers, and the run returns its error. However a worker's thread ends, the executor
//! flushes it ([`Model::flush`]) so that what it trained is in the shared tables when the run
//! returns.
//!
//! ```no_run
//! use hogwild::executor::{self, RunOptions};
//! use hogwild::feed::DataFeedDesc;
//! use hogwild::models::{Bow, BowConfig, LrSchedule, Pool};
//! use hogwild::optim::AdamAsync;
//!
//! # fn main() -> hogwild::Result<()> {
//! let desc = DataFeedDesc::from_file("data.prototxt".as_ref())?;
//! let cfg = BowConfig {
//!     words_slot: "words".into(), label_slot: "label".into(), vocab: 30_000, classes: 2,
//!     dim: 10, bigram_buckets: 1 << 20, pool: Pool::Mean, end_of_text: true, bias: false,
//!     lr_schedule: LrSchedule::Linear, lr_hold: 0.25,
//!     seed: 1,
//! };
//! let model = Bow::new(cfg, AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8))?;
//! executor::startup(&model);
//! let files = vec!["part-0".into(), "part-1".into()];
//! let report = executor::run_from_files(&model, &desc, &files, 4, &["loss"], &RunOptions::default())?;
//! println!("mean loss {}", report.fetched[0].1);
//! # Ok(()) }
//! ```

mod in_memory;
mod ordered;
mod report;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use in_memory::train_dataset;
pub use report::{LocalWindow, Progress, Reporter};

use crate::feed::{
    count_instances, start_feed, Batch, DataFeedDesc, FeedOptions, FeedStats, InMemoryDataset,
};
use crate::metrics::Auc;
use crate::model::{Model, RunPlan, StageTimes};
use crate::{Error, Result};

/// How a run reports and reads.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Print a line every this many batches (all threads together); 0 prints nothing.
    pub print_period: usize,
    /// Where and how progress is shown.
    pub progress: Progress,
    /// Measure and print per-stage times (read, forward, backward, update).
    pub debug: bool,
    /// The data feed's options; its thread count is set to the run's. `feed.epochs` passes are made
    /// in one run. With `feed.in_memory = Some(seed)` training loads the files once and every
    /// worker draws its batches straight from memory (see [`train_dataset`]).
    pub feed: FeedOptions,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            print_period: 100,
            progress: Progress::Auto,
            debug: false,
            feed: FeedOptions::default(),
        }
    }
}

/// The metrics of one epoch of an in-memory training run, reported when its last batch is counted.
#[derive(Debug, Clone)]
pub struct EpochReport {
    /// 1-based.
    pub epoch: usize,
    /// Every metric the model reports (and `auc` when it collects scores), the mean over the
    /// epoch's instances; then the model's run metrics ([`Model::run_metrics`]) gathered since the
    /// previous epoch's report.
    pub fetched: Vec<(String, f64)>,
    pub instances: u64,
    /// Time from the start of the run to the end of this epoch.
    pub elapsed: Duration,
}

impl EpochReport {
    /// The value called `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.fetched.iter().find(|(n, _)| n == name).map(|x| x.1)
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
    /// then `auc`, exact over every instance of the run (of its last epoch, for in-memory
    /// training), when the model collects scores; then the model's run metrics
    /// ([`Model::run_metrics`]) over the whole run (the sum of the epochs' values).
    pub fetched: Vec<(String, f64)>,
    pub batches: u64,
    pub instances: u64,
    pub elapsed: Duration,
    /// Per-stage times summed over threads (debug mode only).
    pub stages: Option<StageTimes>,
    /// The feed's counters. For in-memory runs: lines, bytes and read time of the load, and as
    /// `worker_wait` the time workers spent gathering their batches from memory.
    pub feed: FeedStats,
    /// One report per epoch (in-memory training runs).
    pub epochs: Vec<EpochReport>,
    /// Bytes of data held besides the model: the in-memory dataset and the workers' instance
    /// orders, or the most the feed's queues held (streaming; the peak of one queue times the
    /// number of workers).
    pub data_bytes: usize,
}

impl RunReport {
    /// The fetched value called `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.fetched.iter().find(|(n, _)| n == name).map(|x| x.1)
    }

    /// Instances per second over the run.
    pub fn instances_per_sec(&self) -> f64 {
        self.instances as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The startup step, run once on a fresh model before its first training run (Paddle's startup
/// program): initialises the parameters. A model loaded from a checkpoint skips it.
pub fn startup<M: Model>(model: &M) {
    model.startup();
}

/// Trains `model` in `threads` worker threads on `files` read as `desc` says, for
/// `options.feed.epochs` passes. `fetch` names the metrics to return (empty: all the model
/// reports). With `options.feed.in_memory` set, the files are loaded once and the run is
/// [`train_dataset`]'s; otherwise the feed streams them, re-reading them every epoch.
pub fn run_from_files<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
) -> Result<RunReport> {
    if options.feed.in_memory.is_some() {
        check_threads(threads)?;
        if files.is_empty() {
            return Err(Error::Empty {
                what: "data file list",
            });
        }
        let mut load = options.feed.clone();
        load.threads = threads;
        let data = InMemoryDataset::load(desc, files, &load)?;
        return train_dataset(model, desc, &data, threads, fetch, options, None);
    }
    run_streaming(model, desc, files, threads, fetch, options, true)
}

/// Evaluates `model` on `files` without changing it. With `predictions`, writes one line per
/// instance to that file **in input order** whatever the thread count: each file is loaded into
/// memory in turn, its batches are shared by the threads, and a reorder buffer writes them in
/// sequence (so memory holds one file at a time). Without, the feed streams the files.
pub fn eval_from_files<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    predictions: Option<&Path>,
) -> Result<RunReport> {
    match predictions {
        Some(path) => ordered::predict_in_order(model, desc, files, threads, fetch, options, path),
        None => run_streaming(model, desc, files, threads, fetch, options, false),
    }
}

fn check_threads(threads: usize) -> Result<()> {
    if threads == 0 {
        return Err(Error::InvalidConfig {
            field: "threads".into(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(())
}

/// The metric positions `fetch` asks for (`auc` is always accepted: it is added after the run
/// when the model collects scores).
fn fetch_positions(available: &[&str], fetch: &[&str]) -> Result<Vec<usize>> {
    if fetch.is_empty() {
        return Ok((0..available.len()).collect());
    }
    fetch
        .iter()
        .filter(|name| **name != "auc" || available.contains(&"auc"))
        .map(|name| {
            available
                .iter()
                .position(|a| a == name)
                .ok_or_else(|| Error::UnknownFetch {
                    name: name.to_string(),
                    available: available.join(", "),
                })
        })
        .collect()
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".into()
    }
}

/// What a run shares between its worker threads.
struct Context<'a> {
    names: &'static [&'static str],
    train: bool,
    debug: bool,
    reporter: Reporter,
    flush_every: u64,
    stop: AtomicBool,
    failure: Mutex<Option<Error>>,
    /// Called once when a worker fails (stops the feed).
    on_failure: &'a (dyn Fn() + Sync),
}

impl<'a> Context<'a> {
    fn new(
        names: &'static [&'static str],
        train: bool,
        threads: usize,
        options: &RunOptions,
        on_failure: &'a (dyn Fn() + Sync),
    ) -> Self {
        let reporter = Reporter::new(
            names,
            options.print_period,
            options.progress,
            Instant::now(),
        );
        let flush_every = reporter.flush_every(threads);
        Self {
            names,
            train,
            debug: options.debug,
            reporter,
            flush_every,
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            on_failure,
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn fail(&self, thread: usize, message: String) {
        self.stop.store(true, Ordering::Relaxed);
        (self.on_failure)();
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(Error::WorkerFailed { thread, message });
    }

    fn take_failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// One thread's running totals; each thread owns its own (no shared counters).
struct ThreadState {
    out: Vec<f64>,
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
    stages: StageTimes,
    /// Time spent waiting for or gathering batches.
    wait: Duration,
    local: LocalWindow,
    auc: Auc,
}

impl ThreadState {
    fn new(metrics: usize) -> Self {
        Self {
            out: vec![0.0; metrics],
            sums: vec![0.0; metrics],
            batches: 0,
            instances: 0,
            stages: StageTimes::default(),
            wait: Duration::ZERO,
            local: LocalWindow::new(metrics),
            auc: Auc::default(),
        }
    }

    /// Moves the pairs the model collected in `worker` into this thread's collector.
    fn drain_auc<M: Model>(&mut self, model: &M, worker: &mut M::Worker) {
        if let Some(a) = model.auc(worker) {
            self.auc.merge(std::mem::take(a));
        }
    }
}

impl Default for ThreadState {
    fn default() -> Self {
        Self::new(0)
    }
}

/// Trains or evaluates one batch and records its metrics.
fn step<M: Model>(
    model: &M,
    worker: &mut M::Worker,
    ctx: &Context<'_>,
    t: &mut ThreadState,
    batch: &Batch,
    lines: Option<&mut String>,
) -> Result<()> {
    if ctx.train {
        let stages = ctx.debug.then_some(&mut t.stages);
        model.train_batch(worker, batch, &mut t.out, stages)?;
    } else {
        model.eval_batch(worker, batch, &mut t.out, lines)?;
    }
    // A batch's values are means over its instances: weighted by them, the run's values are
    // means over every instance, whatever the batch size or the short batches at files' ends.
    for (s, v) in t.sums.iter_mut().zip(&t.out) {
        *s += v * batch.len as f64;
    }
    t.batches += 1;
    t.instances += batch.len as u64;
    if !ctx.reporter.is_quiet() {
        t.local.add(&t.out, batch.len);
        if t.local.batches() >= ctx.flush_every {
            ctx.reporter.record(&mut t.local);
        }
    }
    Ok(())
}

/// Runs `body` in one thread per worker; a thread that fails or panics stops the others (they see
/// `ctx.stopped()`) and its error is kept in `ctx`. Returns every thread's state.
fn in_threads<M: Model>(
    model: &M,
    workers: &mut [M::Worker],
    ctx: &Context<'_>,
    body: impl Fn(usize, &mut M::Worker, &mut ThreadState) -> Result<()> + Sync,
) -> Vec<ThreadState> {
    std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter_mut()
            .enumerate()
            .map(|(thread, worker)| {
                let body = &body;
                s.spawn(move || {
                    let mut t = ThreadState::new(ctx.names.len());
                    let result = catch_unwind(AssertUnwindSafe(|| body(thread, worker, &mut t)));
                    // What the worker trained reaches the tables however the thread stopped.
                    let flushed = catch_unwind(AssertUnwindSafe(|| model.flush(worker)));
                    let result = match (result, flushed) {
                        (Ok(r), Err(p)) if r.is_ok() => Err(p),
                        (r, _) => r,
                    };
                    let message = match result {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(e.to_string()),
                        Err(p) => Some(panic_message(p.as_ref())),
                    };
                    if let Some(message) = message {
                        ctx.fail(thread, message);
                    }
                    t.drain_auc(model, worker);
                    ctx.reporter.record(&mut t.local);
                    t
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// Sums the threads' totals into a report (everything but the feed's counters).
fn summarize(
    names: &'static [&'static str],
    fetch: &[&str],
    positions: &[usize],
    states: Vec<ThreadState>,
    elapsed: Duration,
    debug: bool,
) -> (RunReport, Duration) {
    let mut sums = vec![0.0; names.len()];
    let (mut batches, mut instances, mut wait) = (0, 0, Duration::ZERO);
    let mut stages = StageTimes::default();
    let mut auc = Auc::default();
    for t in states {
        for (a, b) in sums.iter_mut().zip(&t.sums) {
            *a += b;
        }
        batches += t.batches;
        instances += t.instances;
        wait += t.wait;
        stages.add(&t.stages);
        auc.merge(t.auc);
    }
    let mut fetched = metric_values(names, positions, &sums, instances);
    if fetch.is_empty() || fetch.contains(&"auc") {
        push_auc(&mut fetched, &mut auc);
    }
    let report = RunReport {
        fetched,
        batches,
        instances,
        elapsed,
        stages: debug.then_some(stages),
        feed: FeedStats::default(),
        epochs: Vec::new(),
        data_bytes: 0,
    };
    (report, wait)
}

/// The means of the metrics at `positions` from their sums weighted by `instances`.
fn metric_values(
    names: &[&str],
    positions: &[usize],
    sums: &[f64],
    instances: u64,
) -> Vec<(String, f64)> {
    let denom = instances.max(1) as f64;
    positions
        .iter()
        .map(|&i| (names[i].to_string(), sums[i] / denom))
        .collect()
}

/// Appends the model's whole-run values (see [`Model::run_metrics`]) that are not fetched yet.
fn push_run_metrics<M: Model>(model: &M, fetched: &mut Vec<(String, f64)>) {
    push_values(fetched, &model.run_metrics());
}

/// Appends the `values` whose names are not fetched yet.
fn push_values(fetched: &mut Vec<(String, f64)>, values: &[(&'static str, f64)]) {
    for &(name, value) in values {
        if !fetched.iter().any(|(n, _)| n == name) {
            fetched.push((name.to_string(), value));
        }
    }
}

/// Sets `auc` to the exact value over `pairs` when they hold both classes.
fn push_auc(fetched: &mut Vec<(String, f64)>, pairs: &mut Auc) {
    if pairs.is_empty() {
        return;
    }
    let Ok(value) = pairs.value() else { return };
    match fetched.iter_mut().find(|(n, _)| n == "auc") {
        Some(entry) => entry.1 = value,
        None => fetched.push(("auc".to_string(), value)),
    }
}

fn run_streaming<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    train: bool,
) -> Result<RunReport> {
    check_threads(threads)?;
    let names = model.metrics();
    let positions = fetch_positions(names, fetch)?;
    if train {
        let count = || count_instances(desc, files);
        model.plan(&RunPlan::new(options.feed.epochs.max(1), &count))?;
    }
    let mut workers = model.workers(desc, threads)?;
    let mut feed_options = options.feed.clone();
    feed_options.threads = threads;
    feed_options.in_memory = None;
    model.run_metrics();
    let start = Instant::now();
    let (queues, feed) = start_feed(desc, files, &feed_options)?;
    let queues: Vec<Mutex<_>> = queues.into_iter().map(|q| Mutex::new(Some(q))).collect();
    let stop_feed = || feed.stop();
    let ctx = Context::new(names, train, threads, options, &stop_feed);
    let states = in_threads(model, &mut workers, &ctx, |thread, worker, t| {
        // The queue drops when this thread ends, so readers stop sending to it.
        let Some(mut queue) = queues[thread]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return Ok(());
        };
        while !ctx.stopped() {
            let t0 = ctx.debug.then(Instant::now);
            let Some(batch) = queue.recv() else {
                break;
            };
            if let Some(t0) = t0 {
                t.stages.read += t0.elapsed();
            }
            step(model, worker, &ctx, t, &batch, None)?;
        }
        Ok(())
    });
    ctx.reporter.finish();
    let failure = ctx.take_failure();
    drop(ctx);
    let feed_result = feed.join();
    if let Some(e) = failure {
        return Err(e);
    }
    let feed_stats = feed_result?;
    let (mut report, _) = summarize(
        names,
        fetch,
        &positions,
        states,
        start.elapsed(),
        options.debug,
    );
    push_run_metrics(model, &mut report.fetched);
    report.data_bytes = feed_stats.peak_queue_bytes * threads;
    report.feed = feed_stats;
    if options.debug {
        report::print_stages(&report, threads);
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
