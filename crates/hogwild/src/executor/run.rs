//! The one worker loop: every run (training from a stream or from memory, evaluation, prediction
//! in input order, a TensorFlow graph's steps) spawns its worker threads here.
//!
//! A run takes its batches from a [`BatchSource`]; each worker thread asks the source for its
//! next batch, steps the model on it and adds the batch's metrics to its own totals. Every batch
//! belongs to an epoch (a pass over the data): a thread adds what it trained of an epoch to that
//! epoch's totals when it moves to a batch of another epoch or runs out of batches, after
//! flushing its worker ([`Model::flush`]) so that the epoch's batches are in the shared tables
//! when it is counted. An epoch is reported, in order, once the source says how many batches it
//! has (a stream knows only when its readers have read past it) and all of them are counted: the
//! epoch hook runs then (it may save a checkpoint), from whichever thread completed the epoch.
//!
//! The first failure or panic of a worker stops the source and the other workers after their
//! current batch; the run returns that error. A stop request ([`super::Stop`], watched by the
//! thread that started the workers) stops them the same way, but the run ends as if its data
//! ended there: each thread counts what it trained, a completed epoch is reported, and the run
//! returns its report marked `stopped`. However a thread ends, its worker is flushed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::report::{LocalWindow, Reporter};
use super::{EpochHook, EpochReport, RunOptions, RunReport, Stop};
use crate::feed::{Batch, DataFeedDesc, FeedStats};
use crate::metrics::Auc;
use crate::model::{Model, RunPlan, StageTimes};
use crate::{Error, Result};

/// Where a batch came from: its epoch (0-based) and its number in the source's order (used by
/// sources that must put results back in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub epoch: usize,
    pub seq: usize,
}

/// Where a run's batches come from: a stream of files, an in-memory dataset, files in order.
pub(crate) trait BatchSource: Sync {
    /// One worker thread's way to its batches.
    type Cursor: Send;

    /// Worker `worker`'s cursor; called once per worker before the threads start.
    fn cursor(&self, worker: usize) -> Self::Cursor;

    /// Fills `batch` with the cursor's next batch and says where it came from; `None` once the
    /// source has no more batches for this worker (or was stopped).
    fn next(&self, cursor: &mut Self::Cursor, batch: &mut Batch) -> Result<Option<Ticket>>;

    /// How many leading epochs have a known batch count ([`BatchSource::epoch_batches`]).
    fn sealed_epochs(&self) -> usize;

    /// The batches of epoch `epoch`, once it is sealed.
    fn epoch_batches(&self, epoch: usize) -> u64;

    /// Stops handing out batches: every worker's next call returns `None` soon.
    fn stop(&self);

    /// Whether evaluation steps write one line per instance, handed to [`BatchSource::submit`].
    fn wants_lines(&self) -> bool {
        false
    }

    /// Takes a stepped batch's lines (sources that write predictions).
    fn submit(&self, _ticket: Ticket, _lines: String) -> Result<()> {
        Ok(())
    }
}

/// What one run does.
pub(crate) struct Spec<'a> {
    /// Training steps, or evaluation.
    pub train: bool,
    /// The metrics to return (empty: all).
    pub fetch: &'a [&'a str],
    pub options: &'a RunOptions,
    pub on_epoch: Option<&'a EpochHook<'a>>,
}

impl Spec<'_> {
    /// The epochs the source serves (`options.feed.epochs`, at least one).
    pub fn epochs(&self) -> usize {
        self.options.feed.epochs.max(1)
    }

    /// The run's plan for [`Model::plan`]: its epochs, and where they sit in a longer schedule
    /// ([`RunOptions::span`](super::RunOptions::span)).
    pub fn plan<'c>(&self, count: &'c (dyn Fn() -> Result<u64> + Sync)) -> RunPlan<'c> {
        let plan = RunPlan::new(self.epochs(), count);
        match self.options.span {
            Some(span) => plan.within(span.before, span.total),
            None => plan,
        }
    }
}

/// Runs one thread per worker of `model` (from [`Model::workers`], made before the source
/// starts so that a desc the model cannot read fails first) over `source` (see the module docs).
/// The report's `feed` holds the workers' wait for batches only; `data_bytes` is 0: the caller
/// adds what its source knows.
pub(crate) fn run<M: Model, S: BatchSource>(
    model: &M,
    workers: Vec<M::Worker>,
    desc: &DataFeedDesc,
    source: &S,
    spec: &Spec<'_>,
) -> Result<RunReport> {
    let names = model.metrics();
    let positions = fetch_positions(&names, spec.fetch)?;
    let threads = workers.len();
    let options = spec.options;
    model.run_metrics();
    let start = Instant::now();
    let reporter = Reporter::new(&names, options.print_period, options.progress, start);
    let shared = Shared {
        model,
        source,
        desc,
        names: &names,
        train: spec.train,
        debug: options.debug,
        flush_every: reporter.flush_every(threads),
        reporter,
        stop: AtomicBool::new(false),
        interrupted: AtomicBool::new(false),
        request: &options.stop,
        failure: Mutex::new(None),
        epochs: Mutex::new(Epochs {
            totals: (0..spec.epochs())
                .map(|_| EpochTotals::new(names.len()))
                .collect(),
            reported: 0,
            last_end: Duration::ZERO,
            run: Vec::new(),
        }),
        hook_order: Mutex::new(()),
        reports: Mutex::new(Vec::new()),
        on_epoch: spec.on_epoch,
        start,
    };
    let cursors: Vec<S::Cursor> = (0..threads).map(|w| source.cursor(w)).collect();
    // Workers write their scratch buffers' lengths (and random state) for every instance: padded,
    // two workers side by side in this Vec never share a cache line.
    let mut workers: Vec<CachePadded<M::Worker>> =
        workers.into_iter().map(CachePadded::new).collect();
    let states: Vec<ThreadState> = std::thread::scope(|s| {
        let watcher = std::thread::current();
        let mut handles = Vec::with_capacity(threads);
        for (thread, (worker, cursor)) in workers.iter_mut().zip(cursors).enumerate() {
            let shared = &shared;
            let watcher = watcher.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("hogwild-worker-{thread}"))
                .spawn_scoped(s, move || {
                    let state = shared.worker_thread(thread, &mut **worker, cursor);
                    watcher.unpark();
                    state
                });
            match spawned {
                Ok(handle) => handles.push(handle),
                // The system refused a thread (too many, or no memory for its stack): the run
                // fails as for a worker's failure, and the threads started stop.
                Err(e) => {
                    shared.fail(Error::WorkerFailed {
                        thread,
                        message: format!("cannot start the thread: {e}"),
                    });
                    break;
                }
            }
        }
        // This thread watches for a stop request while the workers run: it stops the source as
        // well, which wakes workers waiting for a batch (and, once they ended on the request,
        // the source's readers). Each worker wakes it as it ends.
        let watch = || {
            if options.stop.requested() && !shared.interrupted.load(Ordering::Relaxed) {
                shared.interrupt();
            }
        };
        while handles.iter().any(|h| !h.is_finished()) {
            watch();
            std::thread::park_timeout(STOP_POLL);
        }
        watch();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    // An epoch sealed after every thread's last settle (none trained a batch of it) is
    // reported here.
    if !shared.stopped() {
        if let Err(e) = shared.report_ready() {
            shared.fail(e);
        }
    }
    shared.reporter.finish();
    let failure = shared
        .failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(e) = failure {
        return Err(e);
    }
    let epochs = shared
        .epochs
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let reports = shared
        .reports
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    // Workers that saw the request may have ended before this thread did; a request that came
    // as the last batches ended stopped nothing.
    let stopped = (shared.interrupted.into_inner() || options.stop.requested())
        && reports.len() < spec.epochs();
    Ok(summarize(SummaryInput {
        model,
        names: &names,
        fetch: spec.fetch,
        positions: &positions,
        states,
        run: epochs.run,
        epochs: reports,
        elapsed: start.elapsed(),
        debug: options.debug,
        threads,
        stopped,
    }))
}

/// How often the thread that started a run's workers looks for a stop request: the longest a
/// worker waiting for a batch waits after one.
const STOP_POLL: Duration = Duration::from_millis(20);

/// What the worker threads of a run share.
struct Shared<'a, M: Model, S> {
    model: &'a M,
    source: &'a S,
    desc: &'a DataFeedDesc,
    names: &'a [String],
    train: bool,
    debug: bool,
    reporter: Reporter,
    flush_every: u64,
    /// Set by a failure: the run's batches are not counted any more.
    stop: AtomicBool,
    /// Set by a stop request: the threads end after their batch, counting what they trained.
    interrupted: AtomicBool,
    /// The run's stop request, which each worker looks at before taking a batch.
    request: &'a Stop,
    failure: Mutex<Option<Error>>,
    epochs: Mutex<Epochs>,
    /// Held while a thread calls the epoch hook, so that epochs are reported in order.
    hook_order: Mutex<()>,
    reports: Mutex<Vec<EpochReport>>,
    on_epoch: Option<&'a EpochHook<'a>>,
    start: Instant,
}

/// Every epoch's totals, the next epoch to report, and the model's run metrics summed over the
/// epochs reported so far.
struct Epochs {
    totals: Vec<EpochTotals>,
    reported: usize,
    /// When the last reported epoch ended, from the run's start.
    last_end: Duration,
    run: Vec<(&'static str, f64)>,
}

/// One epoch's metric sums (weighted by instances), summed over the threads as they add theirs.
struct EpochTotals {
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
    auc: Auc,
}

impl EpochTotals {
    fn new(metrics: usize) -> Self {
        Self {
            sums: vec![0.0; metrics],
            batches: 0,
            instances: 0,
            auc: Auc::default(),
        }
    }
}

/// One thread's running totals; each thread owns its own (no shared counters).
#[derive(Default)]
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

/// What a thread has trained of its current epoch since it last added to the epoch's totals.
struct Since {
    epoch: Option<usize>,
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
}

impl<M: Model, S: BatchSource> Shared<'_, M, S> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether the run was asked to stop (the source may not be stopped yet: the thread that
    /// started the workers does that).
    fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed) || self.request.requested()
    }

    /// Ends the run on request: no thread takes another batch.
    fn interrupt(&self) {
        self.interrupted.store(true, Ordering::Relaxed);
        self.source.stop();
    }

    /// Stops the run with `error` (the first failure wins).
    fn fail(&self, error: Error) {
        self.stop.store(true, Ordering::Relaxed);
        self.source.stop();
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(error);
    }

    /// One worker thread, start to end: its batches, then the flush and the last settling,
    /// whatever happened.
    fn worker_thread(
        &self,
        thread: usize,
        worker: &mut M::Worker,
        cursor: S::Cursor,
    ) -> ThreadState {
        let n = self.names.len();
        let mut t = ThreadState {
            out: vec![0.0; n],
            sums: vec![0.0; n],
            local: LocalWindow::new(n),
            ..ThreadState::default()
        };
        let mut since = Since {
            epoch: None,
            sums: vec![0.0; n],
            batches: 0,
            instances: 0,
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            self.batches(worker, cursor, &mut t, &mut since)
        }));
        // What the worker trained reaches the tables however the thread stopped; counting it
        // (and reporting an epoch it completes) needs a clean stop of the whole run.
        let settled = catch_unwind(AssertUnwindSafe(|| match &result {
            Ok(Ok(())) if !self.stopped() => self.settle(&mut t, worker, &mut since),
            _ => {
                self.model.flush(worker);
                Ok(())
            }
        }));
        let message = match (result, settled) {
            (Ok(Ok(())), Ok(Ok(()))) => None,
            (Ok(Err(e)), _) | (Ok(Ok(())), Ok(Err(e))) => Some(e.to_string()),
            (Err(p), _) | (Ok(Ok(())), Err(p)) => Some(panic_message(p.as_ref())),
        };
        if let Some(message) = message {
            self.fail(Error::WorkerFailed { thread, message });
        }
        self.drain_auc(worker, &mut t);
        self.reporter.record(&mut t.local);
        t
    }

    /// Steps the model on the cursor's batches until the source ends or the run stops.
    fn batches(
        &self,
        worker: &mut M::Worker,
        mut cursor: S::Cursor,
        t: &mut ThreadState,
        since: &mut Since,
    ) -> Result<()> {
        let mut batch = Batch::empty(self.desc);
        let lines = self.source.wants_lines();
        let mut sealed = self.source.sealed_epochs();
        while !self.stopped() && !self.interrupted() {
            let t0 = Instant::now();
            // The source's own errors (a file that cannot be read) are the run's, not this
            // worker's: they are returned as they are.
            let ticket = match self.source.next(&mut cursor, &mut batch) {
                Ok(Some(ticket)) => ticket,
                Ok(None) => break,
                Err(e) => {
                    self.fail(e);
                    break;
                }
            };
            let waited = t0.elapsed();
            t.wait += waited;
            t.stages.read += waited;
            if since.epoch != Some(ticket.epoch) {
                self.settle(t, worker, since)?;
                since.epoch = Some(ticket.epoch);
            }
            let mut text = lines.then(String::new);
            if let Err(e) = self.step(worker, t, &batch, text.as_mut()) {
                // A line the model refuses is the data's fault, named by its file and line: the
                // run's error as it is, not this worker's failure.
                match batch.locate_error(e) {
                    e @ Error::BadRecord { .. } => {
                        self.fail(e);
                        break;
                    }
                    e => return Err(e),
                }
            }
            if let Some(text) = text {
                self.source.submit(ticket, text)?;
            }
            // An epoch whose count the source learns after this thread counted its batches is
            // reported by the next thread to see the news.
            let now = self.source.sealed_epochs();
            if now != sealed {
                sealed = now;
                self.report_ready()?;
            }
        }
        Ok(())
    }

    /// Trains or evaluates one batch and records its metrics.
    fn step(
        &self,
        worker: &mut M::Worker,
        t: &mut ThreadState,
        batch: &Batch,
        lines: Option<&mut String>,
    ) -> Result<()> {
        if self.train {
            let stages = self.debug.then_some(&mut t.stages);
            self.model.train_batch(worker, batch, &mut t.out, stages)?;
        } else {
            self.model.eval_batch(worker, batch, &mut t.out, lines)?;
        }
        // A batch's values are means over its instances: weighted by them, the run's values are
        // means over every instance, whatever the batch size or the short batches at files' ends.
        for (s, v) in t.sums.iter_mut().zip(&t.out) {
            *s += v * batch.len as f64;
        }
        t.batches += 1;
        t.instances += batch.len as u64;
        if !self.reporter.is_quiet() {
            t.local.add(&t.out, batch.len);
            self.reporter.batch_done(&mut t.local, self.flush_every);
        }
        Ok(())
    }

    /// Moves the pairs the model collected in `worker` into the thread's collector.
    fn drain_auc(&self, worker: &mut M::Worker, t: &mut ThreadState) {
        if let Some(a) = self.model.auc(worker) {
            t.auc.merge(std::mem::take(a));
        }
    }

    /// Adds what `t` trained of `since.epoch` to that epoch's totals, then reports every epoch
    /// that is complete.
    fn settle(&self, t: &mut ThreadState, worker: &mut M::Worker, since: &mut Since) -> Result<()> {
        let Some(epoch) = since.epoch else {
            return Ok(());
        };
        // The epoch's batches of this thread reach the tables before they are counted.
        self.model.flush(worker);
        self.drain_auc(worker, t);
        {
            let mut all = self.epochs.lock().unwrap_or_else(|p| p.into_inner());
            // Sources serve epochs below the run's: a bad index is a bug, caught as a panic.
            let e = &mut all.totals[epoch];
            for ((s, now), before) in e.sums.iter_mut().zip(&t.sums).zip(&since.sums) {
                *s += now - before;
            }
            e.batches += t.batches - since.batches;
            e.instances += t.instances - since.instances;
            e.auc.merge(std::mem::take(&mut t.auc));
        }
        since.sums.copy_from_slice(&t.sums);
        (since.batches, since.instances) = (t.batches, t.instances);
        self.report_ready()
    }

    /// Reports, in order, every epoch whose batches are all counted, and calls the hook on each.
    fn report_ready(&self) -> Result<()> {
        let mut guard = self.epochs.lock().unwrap_or_else(|p| p.into_inner());
        let all = &mut *guard;
        let sealed = self.source.sealed_epochs().min(all.totals.len());
        let mut ready: Vec<EpochReport> = Vec::new();
        // An epoch without a batch (files without a line) is not reported: there is nothing to
        // report or save, and the run says so.
        while all.reported < sealed
            && all.totals[all.reported].batches > 0
            && all.totals[all.reported].batches == self.source.epoch_batches(all.reported)
        {
            let e = &mut all.totals[all.reported];
            let everything: Vec<usize> = (0..self.names.len()).collect();
            let mut fetched = metric_values(self.names, &everything, &e.sums, e.instances);
            let unavailable = push_auc(&mut fetched, &mut std::mem::take(&mut e.auc));
            let instances = e.instances;
            let values = self.model.run_metrics();
            push_values(&mut fetched, &values);
            add_values(&mut all.run, &values);
            all.reported += 1;
            let elapsed = self.start.elapsed();
            ready.push(EpochReport {
                epoch: all.reported,
                fetched,
                instances,
                elapsed,
                took: elapsed.saturating_sub(all.last_end),
                unavailable,
            });
            all.last_end = elapsed;
        }
        if ready.is_empty() {
            return Ok(());
        }
        // Taken before the totals are let go: a thread that reports later epochs waits here.
        let _in_order = self.hook_order.lock().unwrap_or_else(|p| p.into_inner());
        drop(guard);
        for report in ready {
            if let Some(hook) = self.on_epoch {
                hook(&report)?;
            }
            self.reports
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(report);
        }
        Ok(())
    }
}

struct SummaryInput<'a, M> {
    model: &'a M,
    names: &'a [String],
    fetch: &'a [&'a str],
    positions: &'a [usize],
    states: Vec<ThreadState>,
    run: Vec<(&'static str, f64)>,
    epochs: Vec<EpochReport>,
    elapsed: Duration,
    debug: bool,
    threads: usize,
    stopped: bool,
}

/// Sums the threads' totals into a report: the fetched means over the run, `auc` (the last
/// epoch's, when the model collects scores), the model's run metrics over the whole run.
fn summarize<M: Model>(input: SummaryInput<'_, M>) -> RunReport {
    let mut sums = vec![0.0; input.names.len()];
    let (mut batches, mut instances, mut wait) = (0, 0, Duration::ZERO);
    let mut stages = StageTimes::default();
    for t in &input.states {
        for (a, b) in sums.iter_mut().zip(&t.sums) {
            *a += b;
        }
        batches += t.batches;
        instances += t.instances;
        wait += t.wait;
        stages.add(&t.stages);
    }
    let mut fetched = metric_values(input.names, input.positions, &sums, instances);
    let want_auc = input.fetch.is_empty() || input.fetch.contains(&"auc");
    if let Some(auc) = input.epochs.last().and_then(|e| e.get("auc")) {
        if want_auc {
            fetched.push(("auc".into(), auc));
        }
    }
    let unavailable = match input.epochs.last() {
        Some(last) if want_auc => last.unavailable.clone(),
        _ => Vec::new(),
    };
    let mut run = input.run;
    add_values(&mut run, &input.model.run_metrics());
    push_values(&mut fetched, &run);
    let elapsed = input.elapsed;
    let report = RunReport {
        fetched,
        batches,
        instances,
        elapsed,
        stages: input.debug.then_some(stages),
        feed: FeedStats {
            instances,
            batches,
            worker_wait: wait,
            elapsed,
            workers: input.threads,
            ..FeedStats::default()
        },
        epochs: input.epochs,
        data_bytes: 0,
        stopped: input.stopped,
        unavailable,
    };
    if input.debug {
        super::report::print_stages(&report, input.threads);
    }
    report
}

/// The most worker threads a run starts. Each holds its own scratch buffers (and a stack), so a
/// mistyped count (100000) would exhaust memory before it did any good; a run on more cores than
/// this is not a case this executor is made for.
pub const MAX_THREADS: usize = 1024;

pub(crate) fn check_threads(threads: usize) -> Result<()> {
    let reason = match threads {
        0 => "must be at least 1".to_string(),
        n if n > MAX_THREADS => format!("{n} is more than the {MAX_THREADS} a run can start"),
        _ => return Ok(()),
    };
    Err(Error::InvalidConfig {
        field: "threads".into(),
        reason,
    })
}

/// The metric positions `fetch` asks for (`auc` is always accepted: it is added after the run
/// when the model collects scores).
fn fetch_positions(available: &[String], fetch: &[&str]) -> Result<Vec<usize>> {
    if fetch.is_empty() {
        return Ok((0..available.len()).collect());
    }
    fetch
        .iter()
        .filter(|name| **name != "auc" || available.iter().any(|a| a == "auc"))
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

/// The means of the metrics at `positions` from their sums weighted by `instances`.
fn metric_values(
    names: &[String],
    positions: &[usize],
    sums: &[f64],
    instances: u64,
) -> Vec<(String, f64)> {
    let denom = instances.max(1) as f64;
    positions
        .iter()
        .map(|&i| (names[i].clone(), sums[i] / denom))
        .collect()
}

/// Appends the `values` whose names are not fetched yet.
fn push_values(fetched: &mut Vec<(String, f64)>, values: &[(&'static str, f64)]) {
    for &(name, value) in values {
        if !fetched.iter().any(|(n, _)| n == name) {
            fetched.push((name.to_string(), value));
        }
    }
}

/// Adds `values` (from [`Model::run_metrics`]) to `sums`, by name.
fn add_values(sums: &mut Vec<(&'static str, f64)>, values: &[(&'static str, f64)]) {
    for &(name, value) in values {
        match sums.iter_mut().find(|(n, _)| *n == name) {
            Some(sum) => sum.1 += value,
            None => sums.push((name, value)),
        }
    }
}

/// Sets `auc` to the exact value over `pairs` when they hold both classes; otherwise says why
/// there is none (no pairs collected, as in training, is no reason to mention).
fn push_auc(fetched: &mut Vec<(String, f64)>, pairs: &mut Auc) -> Vec<(String, String)> {
    if pairs.is_empty() {
        return Vec::new();
    }
    let value = match pairs.value() {
        Ok(value) => value,
        Err(Error::Metric { name, reason }) => return vec![(name.to_string(), reason)],
        Err(other) => return vec![("auc".to_string(), other.to_string())],
    };
    match fetched.iter_mut().find(|(n, _)| n == "auc") {
        Some(entry) => entry.1 = value,
        None => fetched.push(("auc".to_string(), value)),
    }
    Vec::new()
}
