//! The asynchronous executor: trains one shared model in several threads from files (Paddle's
//! `AsyncExecutor.run_from_files`), and evaluates or predicts with the same machinery.
//!
//! A run starts the data feed, which gives every worker thread its own queue of batches, and runs
//! one worker per queue. Workers share the model's parameters without locks (the Hogwild store);
//! each keeps its own scratch buffers and computes single-threaded. The model's metrics are averaged
//! over all batches of all threads and returned; every `print_period` batches the executor prints
//! the step, the elapsed time, instances/s and the metrics averaged since the previous line (an
//! `indicatif` spinner on a terminal, plain lines otherwise). A worker that fails or panics stops the
//! feed and the other workers, and the run returns its error.
//!
//! ```no_run
//! use hogwild::executor::{self, RunOptions};
//! use hogwild::feed::DataFeedDesc;
//! use hogwild::models::{Bow, BowConfig, Pool};
//! use hogwild::optim::AdamAsync;
//!
//! # fn main() -> hogwild::Result<()> {
//! let desc = DataFeedDesc::from_file("data.prototxt".as_ref())?;
//! let cfg = BowConfig {
//!     words_slot: "words".into(), label_slot: "label".into(), vocab: 30_000, classes: 2,
//!     dim: 10, bigram_buckets: 1 << 20, pool: Pool::Mean, seed: 1,
//! };
//! let model = Bow::new(cfg, AdamAsync::new(0.01f32, 0.9, 0.999, 1e-8))?;
//! executor::startup(&model);
//! let files = vec!["part-0".into(), "part-1".into()];
//! let report = executor::run_from_files(&model, &desc, &files, 4, &["loss"], &RunOptions::default())?;
//! println!("mean loss {}", report.fetched[0].1);
//! # Ok(()) }
//! ```

mod report;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use report::Progress;

use crate::feed::{start_feed, DataFeedDesc, FeedOptions, FeedStats, WorkerQueue};
use crate::model::{Model, StageTimes};
use crate::{Error, Result};
use report::Reporter;

/// How a run reports and reads.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Print a line every this many batches (all threads together); 0 prints nothing.
    pub print_period: usize,
    /// Where and how progress is shown.
    pub progress: Progress,
    /// Measure and print per-stage times (read, forward, backward, update).
    pub debug: bool,
    /// The data feed's options; its thread count is set to the run's.
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

/// What a run returns.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The fetched metrics, in the order asked, each averaged over every batch of every thread.
    pub fetched: Vec<(String, f64)>,
    pub batches: u64,
    pub instances: u64,
    pub elapsed: Duration,
    /// Per-stage times summed over threads (debug mode only).
    pub stages: Option<StageTimes>,
    /// The feed's counters.
    pub feed: FeedStats,
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

/// Trains `model` in `threads` worker threads on `files` read as `desc` says. `fetch` names the
/// metrics to return (empty: all the model reports).
pub fn run_from_files<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
) -> Result<RunReport> {
    run(model, desc, files, threads, fetch, options, Mode::Train)
}

/// Evaluates `model` on `files` without changing it; with `predictions`, writes one line per
/// instance to that file (with more than one thread, batches appear in the order they finish).
pub fn eval_from_files<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    predictions: Option<&Path>,
) -> Result<RunReport> {
    run(
        model,
        desc,
        files,
        threads,
        fetch,
        options,
        Mode::Eval { predictions },
    )
}

#[derive(Clone, Copy)]
enum Mode<'a> {
    Train,
    Eval { predictions: Option<&'a Path> },
}

/// What each worker hands back.
#[derive(Default)]
struct WorkerTotals {
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
    stages: StageTimes,
}

/// The metric positions `fetch` asks for.
fn fetch_positions(available: &[&str], fetch: &[&str]) -> Result<Vec<usize>> {
    if fetch.is_empty() {
        return Ok((0..available.len()).collect());
    }
    fetch
        .iter()
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

fn run<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    mode: Mode<'_>,
) -> Result<RunReport> {
    if threads == 0 {
        return Err(Error::InvalidConfig {
            field: "threads".into(),
            reason: "must be at least 1".into(),
        });
    }
    let names = model.metrics();
    let positions = fetch_positions(names, fetch)?;
    let mut workers = (0..threads)
        .map(|_| model.worker(desc))
        .collect::<Result<Vec<_>>>()?;
    let predictions = match mode {
        Mode::Eval {
            predictions: Some(path),
        } => Some(Mutex::new(BufWriter::new(File::create(path).map_err(
            |e| Error::Io {
                path: path.display().to_string(),
                message: format!("cannot create the predictions file: {e}"),
            },
        )?))),
        _ => None,
    };
    let mut feed_options = options.feed.clone();
    feed_options.threads = threads;
    model.run_metrics();
    let start = Instant::now();
    let (queues, feed) = start_feed(desc, files, &feed_options)?;
    let reporter = Reporter::new(names, options.print_period, options.progress, start);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let totals: Vec<WorkerTotals> = std::thread::scope(|s| {
        let handles: Vec<_> = queues
            .into_iter()
            .zip(workers.iter_mut())
            .enumerate()
            .map(|(thread, (mut queue, worker))| {
                let (reporter, stop, failure, feed) = (&reporter, &stop, &failure, &feed);
                let predictions = predictions.as_ref();
                let debug = options.debug;
                s.spawn(move || {
                    let mut totals = WorkerTotals {
                        sums: vec![0.0; names.len()],
                        ..Default::default()
                    };
                    let body = catch_unwind(AssertUnwindSafe(|| {
                        work(
                            model,
                            worker,
                            &mut queue,
                            mode,
                            predictions,
                            debug,
                            stop,
                            reporter,
                            &mut totals,
                        )
                    }));
                    let message = match body {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(e.to_string()),
                        Err(p) => Some(panic_message(p.as_ref())),
                    };
                    if let Some(message) = message {
                        stop.store(true, Ordering::Relaxed);
                        feed.stop();
                        let mut f = failure.lock().unwrap_or_else(|p| p.into_inner());
                        f.get_or_insert(Error::WorkerFailed { thread, message });
                    }
                    drop(queue);
                    totals
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let feed_result = feed.join();
    reporter.finish();
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let feed_stats = feed_result?;
    if let Some(p) = predictions {
        let mut w = p.into_inner().unwrap_or_else(|p| p.into_inner());
        w.flush().map_err(|e| Error::Io {
            path: mode_path(mode),
            message: format!("cannot write predictions: {e}"),
        })?;
    }
    let elapsed = start.elapsed();
    let mut all = WorkerTotals {
        sums: vec![0.0; names.len()],
        ..Default::default()
    };
    for t in &totals {
        for (a, b) in all.sums.iter_mut().zip(&t.sums) {
            *a += b;
        }
        all.batches += t.batches;
        all.instances += t.instances;
        all.stages.add(&t.stages);
    }
    let denom = all.batches.max(1) as f64;
    let mut fetched: Vec<(String, f64)> = positions
        .iter()
        .map(|&i| (names[i].to_string(), all.sums[i] / denom))
        .collect();
    fetched.extend(
        model
            .run_metrics()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v)),
    );
    let report = RunReport {
        fetched,
        batches: all.batches,
        instances: all.instances,
        elapsed,
        stages: options.debug.then_some(all.stages),
        feed: feed_stats,
    };
    if options.debug {
        report::print_stages(&report, threads);
    }
    Ok(report)
}

fn mode_path(mode: Mode<'_>) -> String {
    match mode {
        Mode::Eval {
            predictions: Some(p),
        } => p.display().to_string(),
        _ => String::new(),
    }
}

#[allow(clippy::too_many_arguments)] // the worker's whole context, borrowed from the run
fn work<M: Model>(
    model: &M,
    worker: &mut M::Worker,
    queue: &mut WorkerQueue,
    mode: Mode<'_>,
    predictions: Option<&Mutex<BufWriter<File>>>,
    debug: bool,
    stop: &AtomicBool,
    reporter: &Reporter,
    totals: &mut WorkerTotals,
) -> Result<()> {
    let mut out = vec![0.0f64; totals.sums.len()];
    let mut lines = String::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let t0 = debug.then(Instant::now);
        let Some(batch) = queue.recv() else {
            return Ok(());
        };
        if let Some(t0) = t0 {
            totals.stages.read += t0.elapsed();
        }
        match mode {
            Mode::Train => model.train_batch(
                worker,
                &batch,
                &mut out,
                debug.then_some(&mut totals.stages),
            )?,
            Mode::Eval { .. } => {
                lines.clear();
                let text = predictions.is_some().then_some(&mut lines);
                model.eval_batch(worker, &batch, &mut out, text)?;
                if let Some(p) = predictions {
                    let mut w = p.lock().unwrap_or_else(|p| p.into_inner());
                    w.write_all(lines.as_bytes()).map_err(|e| Error::Io {
                        path: mode_path(mode),
                        message: format!("cannot write predictions: {e}"),
                    })?;
                }
            }
        }
        for (s, v) in totals.sums.iter_mut().zip(&out) {
            *s += v;
        }
        totals.batches += 1;
        totals.instances += batch.len as u64;
        reporter.record(&out, batch.len);
    }
}

#[cfg(test)]
mod tests;
