//! The streaming feed: reader threads take files from a shared queue, parse them into batches and
//! hand the batches to the workers' bounded queues, each to the next queue with room. A worker
//! takes from its own queue; one whose queue stays empty a moment takes the oldest batch of
//! another's, and one whose queue has ended drains the others' before it ends, so a slow worker
//! keeps no batches the others are idle for. A large plain file is queued as byte ranges, so that
//! one file is read by several readers.
//!
//! Every batch belongs to one epoch (pass over the files): a reader sends its partial batch when
//! it moves on to the next epoch's pieces. An epoch is sealed once every reader has moved past it;
//! from then on its batch count is final ([`FeedHandle::sealed_epochs`],
//! [`FeedHandle::epoch_batches`]), so the executor can tell when an epoch's last batch is trained.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::batch::Batch;
use super::desc::DataFeedDesc;
use super::file_queue::FileQueue;
use super::parser::{LineError, LineParser, LinePrefix};
use super::source::{plan_pieces, Piece, Source, MIN_PIECE_BYTES};
use crate::channel::{ByteSize, Channel, Got, TryPutError};
use crate::{Error, Result};

/// What to do with a malformed line.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorPolicy {
    /// The first bad line stops the run with `file:line: slot "name": cause`.
    Strict,
    /// Bad lines are skipped and counted; the run stops once the count passes either budget.
    /// Bad lines are counted in the first pass over the files only: a streaming run of several
    /// epochs reads the same bad lines again and skips them without counting them twice.
    Skip {
        /// Most bad lines tolerated (`None`: no count limit).
        max_bad_lines: Option<u64>,
        /// Largest tolerated fraction of bad lines among the lines of the first pass, checked
        /// once 1000 lines were read and again at the end (`None`: no fraction limit).
        max_bad_fraction: Option<f64>,
    },
}

impl ErrorPolicy {
    /// `Err` when `bad` bad lines among `lines` read are over the budget: the count always, the
    /// fraction once [`FRACTION_MIN_LINES`] lines were read or `at_end`. `first` gives the first
    /// bad line's message for the error.
    pub(crate) fn over_budget(
        &self,
        bad: u64,
        lines: u64,
        at_end: bool,
        first: impl FnOnce() -> String,
    ) -> Result<()> {
        let ErrorPolicy::Skip {
            max_bad_lines,
            max_bad_fraction,
        } = self
        else {
            return Ok(());
        };
        let budget = if let Some(max) = max_bad_lines.filter(|&max| bad > max) {
            format!("{max} line{}", if max == 1 { "" } else { "s" })
        } else if let Some(fraction) = max_bad_fraction.filter(|&f| {
            (at_end || lines >= FRACTION_MIN_LINES) && lines > 0 && bad as f64 > f * lines as f64
        }) {
            format!("{}% of lines", fraction * 100.0)
        } else {
            return Ok(());
        };
        Err(Error::BadLineBudget {
            bad,
            lines,
            budget,
            first: first(),
        })
    }
}

/// How long a worker waits on its own empty queue before it looks in the others'.
const STEAL_AFTER: Duration = Duration::from_millis(1);

/// Lines read before the fraction budget is checked during the run.
const FRACTION_MIN_LINES: u64 = 1000;
/// Bad lines kept as examples for the final report.
pub(crate) const BAD_EXAMPLES: usize = 5;

/// How a feed runs.
#[derive(Debug, Clone)]
pub struct FeedOptions {
    /// Worker threads, each with its own queue (at least 1).
    pub threads: usize,
    /// Reader threads (0: one per worker, at most one per file).
    pub readers: usize,
    /// Passes over the files.
    pub epochs: usize,
    /// Batches each worker queue holds at most.
    pub queue_batches: usize,
    /// Bytes each worker queue holds at most (a single larger batch still passes).
    pub queue_bytes: usize,
    /// Strict or skip-with-budget.
    pub errors: ErrorPolicy,
    /// How the executor reads the files for training (the feed itself always streams).
    pub mode: FeedMode,
    /// Overrides the desc's batch_size.
    pub batch_size: Option<usize>,
    /// The fields before the slots on every line (Paddle's instance id, content and log key).
    pub line_prefix: LinePrefix,
}

impl Default for FeedOptions {
    fn default() -> Self {
        FeedOptions {
            threads: 1,
            readers: 0,
            epochs: 1,
            queue_batches: 16,
            queue_bytes: 64 << 20,
            errors: ErrorPolicy::Strict,
            mode: FeedMode::Stream,
            batch_size: None,
            line_prefix: LinePrefix::default(),
        }
    }
}

impl FeedOptions {
    /// The defaults, with `threads` taken from the desc's `thread_num` when it is set (> 0), and
    /// the in-memory mode (shuffled with seed 0) for Paddle's in-memory readers
    /// (`MultiSlotInMemoryDataFeed`, `SlotRecordInMemoryDataFeed`).
    pub fn for_desc(desc: &DataFeedDesc) -> Self {
        let defaults = FeedOptions::default();
        FeedOptions {
            threads: usize::try_from(desc.thread_num())
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or(defaults.threads),
            mode: if desc.is_in_memory() {
                FeedMode::InMemory { shuffle: Some(0) }
            } else {
                FeedMode::Stream
            },
            ..defaults
        }
    }

    pub(crate) fn batch_size(&self, desc: &DataFeedDesc) -> usize {
        self.batch_size
            .unwrap_or(desc.batch_size().max(1) as usize)
            .max(1)
    }
}

/// How a training run reads its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedMode {
    /// Read every epoch from the files again: memory holds only the queues.
    Stream,
    /// Load the files once; every epoch is served from memory. `shuffle: Some(seed)` shuffles
    /// the instances (the same seed, the same batches); `None` keeps file order.
    InMemory {
        /// The seed of the shuffle, or `None` for file order.
        shuffle: Option<u64>,
    },
}

/// What a feed did, reported by [`FeedHandle::join`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedStats {
    /// Instances delivered to workers.
    pub instances: u64,
    /// Batches delivered to workers.
    pub batches: u64,
    /// Lines read (good and bad).
    pub lines: u64,
    /// Bytes of lines read (after decompression or `pipe_command`).
    pub bytes: u64,
    /// Bad lines skipped (skip mode), each counted once however many passes read it.
    pub bad_lines: u64,
    /// The first few bad lines' messages.
    pub bad_examples: Vec<String>,
    /// What `pipe_command` wrote on standard error for files it otherwise read well, one
    /// message per file (naming the command and the file), from the first pass over the files.
    pub pipe_stderr: Vec<String>,
    /// Time reader threads spent reading and parsing (summed over readers).
    pub read_time: Duration,
    /// Time reader threads were blocked because every worker queue was full.
    pub reader_blocked: Duration,
    /// Time workers waited on an empty queue (summed over workers).
    pub worker_wait: Duration,
    /// Wall time from start to join.
    pub elapsed: Duration,
    /// Number of workers.
    pub workers: usize,
    /// The most bytes any worker queue held at once.
    pub peak_queue_bytes: usize,
    /// The byte limit of each worker queue.
    pub queue_byte_limit: usize,
}

impl FeedStats {
    /// Share of the workers' time spent waiting for data, in percent.
    pub fn io_percent(&self) -> f64 {
        let total = self.elapsed.as_secs_f64() * self.workers.max(1) as f64;
        if total == 0.0 {
            return 0.0;
        }
        (100.0 * self.worker_wait.as_secs_f64() / total).min(100.0)
    }

    /// Instances delivered per second of wall time.
    pub fn instances_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs == 0.0 {
            0.0
        } else {
            self.instances as f64 / secs
        }
    }

    /// Parsing speed of the readers, in MB/s of line bytes per reader-second.
    pub fn parse_mb_per_sec(&self) -> f64 {
        let secs = self.read_time.as_secs_f64();
        if secs == 0.0 {
            0.0
        } else {
            self.bytes as f64 / 1e6 / secs
        }
    }
}

impl std::fmt::Display for FeedStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} instances in {} batches, {:.0} instances/s, {} lines ({:.1} MB), read+parse {:.2}s, \
             IO wait {:.1}%, peak queue {} of {} bytes",
            self.instances,
            self.batches,
            self.instances_per_sec(),
            self.lines,
            self.bytes as f64 / 1e6,
            self.read_time.as_secs_f64(),
            self.io_percent(),
            self.peak_queue_bytes,
            self.queue_byte_limit,
        )?;
        if self.bad_lines > 0 {
            write!(f, ", {} bad lines skipped", self.bad_lines)?;
            for example in &self.bad_examples {
                write!(f, "\n  {example}")?;
            }
        }
        Ok(())
    }
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX)) as u64
}

/// State shared by the readers, the workers' queues and the handle.
pub(crate) struct Shared {
    stop: AtomicBool,
    pub(crate) channels: Vec<Arc<Channel<Tagged>>>,
    /// Per epoch: batches delivered, and readers that have not moved past it yet.
    epoch_batches: Vec<AtomicU64>,
    readers_in: Vec<AtomicUsize>,
    /// Epochs every reader has moved past (their counts are final), always the first ones.
    sealed: AtomicUsize,
    first_error: Mutex<Option<Error>>,
    policy: ErrorPolicy,
    start: Instant,
    lines: AtomicU64,
    /// Lines read in the first pass over the files, which the fraction budget is taken of.
    pass_lines: AtomicU64,
    bytes: AtomicU64,
    instances: AtomicU64,
    batches: AtomicU64,
    bad: AtomicU64,
    bad_examples: Mutex<Vec<String>>,
    pipe_stderr: Mutex<Vec<String>>,
    read_nanos: AtomicU64,
    blocked_nanos: AtomicU64,
    wait_nanos: AtomicU64,
    active_producers: AtomicUsize,
}

impl Shared {
    pub(crate) fn new(opts: &FeedOptions, workers: usize, readers: usize) -> Arc<Self> {
        let epochs = opts.epochs;
        Arc::new(Shared {
            stop: AtomicBool::new(false),
            channels: (0..workers)
                .map(|_| Arc::new(Channel::new(opts.queue_batches, opts.queue_bytes)))
                .collect(),
            epoch_batches: (0..epochs).map(|_| AtomicU64::new(0)).collect(),
            readers_in: (0..epochs).map(|_| AtomicUsize::new(readers)).collect(),
            sealed: AtomicUsize::new(0),
            first_error: Mutex::new(None),
            policy: opts.errors.clone(),
            start: Instant::now(),
            lines: AtomicU64::new(0),
            pass_lines: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            instances: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            bad: AtomicU64::new(0),
            bad_examples: Mutex::new(Vec::new()),
            pipe_stderr: Mutex::new(Vec::new()),
            read_nanos: AtomicU64::new(0),
            blocked_nanos: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
            active_producers: AtomicUsize::new(0),
        })
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Stops everything: workers see the end at their next `recv`, producers fail to put.
    pub(crate) fn stop_all(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for channel in &self.channels {
            channel.close();
        }
    }

    /// Records the run's first error and stops the feed.
    pub(crate) fn fail(&self, error: Error) {
        let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(error);
        }
        drop(first);
        self.stop_all();
    }

    pub(crate) fn take_error(&self) -> Option<Error> {
        self.first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Registers producer threads; the last one to finish closes the worker queues.
    pub(crate) fn add_producers(&self, n: usize) {
        self.active_producers.fetch_add(n, Ordering::SeqCst);
    }

    pub(crate) fn producer_done(&self) {
        if self.active_producers.fetch_sub(1, Ordering::SeqCst) == 1 {
            for channel in &self.channels {
                channel.close();
            }
        }
    }

    pub(crate) fn add_read_time(&self, d: Duration) {
        self.read_nanos.fetch_add(nanos(d), Ordering::Relaxed);
    }

    fn delivered(&self, epoch: usize, instances: u64) {
        self.instances.fetch_add(instances, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        if let Some(count) = self.epoch_batches.get(epoch) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A reader has moved past epoch `epoch` (sent its last batch of it). The last reader to do
    /// so seals it. Readers leave epochs in order, so the last to leave epoch `e + 1` has left
    /// `e` before: epochs are sealed in order, and the count of seals is the sealed prefix.
    fn leave_epoch(&self, epoch: usize) {
        // AcqRel: the sealing reader's view includes every other reader's deliveries of the
        // epoch (each left it after delivering), which SeqCst on `sealed` passes on.
        if self.readers_in[epoch].fetch_sub(1, Ordering::AcqRel) == 1 {
            self.sealed.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Handles a bad line (met in the first pass over the files, or a later one) under the
    /// error policy: `Err` stops the reader.
    fn bad_line(&self, error: Error, first_pass: bool) -> Result<()> {
        if self.policy == ErrorPolicy::Strict {
            return Err(error);
        }
        if !first_pass {
            // The same line, counted (and held against the budget) in the first pass.
            return Ok(());
        }
        let bad = self.bad.fetch_add(1, Ordering::Relaxed) + 1;
        {
            let mut examples = self.bad_examples.lock().unwrap_or_else(|e| e.into_inner());
            if examples.len() < BAD_EXAMPLES {
                examples.push(error.to_string());
            }
        }
        let lines = self.pass_lines.load(Ordering::Relaxed);
        self.policy
            .over_budget(bad, lines, false, || self.first_bad_line())
    }

    fn first_bad_line(&self) -> String {
        self.bad_examples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .first()
            .cloned()
            .unwrap_or_default()
    }

    /// The budget over the whole run.
    fn check_final_budget(&self) -> Result<()> {
        let bad = self.bad.load(Ordering::Relaxed);
        let lines = self.pass_lines.load(Ordering::Relaxed);
        self.policy
            .over_budget(bad, lines, true, || self.first_bad_line())
    }

    pub(crate) fn stats(&self) -> FeedStats {
        FeedStats {
            instances: self.instances.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            lines: self.lines.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            bad_lines: self.bad.load(Ordering::Relaxed),
            bad_examples: self
                .bad_examples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            pipe_stderr: self
                .pipe_stderr
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            read_time: Duration::from_nanos(self.read_nanos.load(Ordering::Relaxed)),
            reader_blocked: Duration::from_nanos(self.blocked_nanos.load(Ordering::Relaxed)),
            worker_wait: Duration::from_nanos(self.wait_nanos.load(Ordering::Relaxed)),
            elapsed: self.start.elapsed(),
            workers: self.channels.len(),
            peak_queue_bytes: self
                .channels
                .iter()
                .map(|c| c.peak_bytes())
                .max()
                .unwrap_or(0),
            queue_byte_limit: self.channels.first().map_or(0, |c| c.byte_limit()),
        }
    }
}

/// One worker's queue of batches (and its way into the others' when its own is empty).
pub struct WorkerQueue {
    index: usize,
    channel: Arc<Channel<Tagged>>,
    shared: Arc<Shared>,
}

impl WorkerQueue {
    pub(crate) fn all(shared: &Arc<Shared>) -> Vec<WorkerQueue> {
        shared
            .channels
            .iter()
            .enumerate()
            .map(|(index, channel)| WorkerQueue {
                index,
                channel: Arc::clone(channel),
                shared: Arc::clone(shared),
            })
            .collect()
    }

    /// The next batch; `None` at the end of the data or once the feed is stopped. Its own
    /// queue's first; when that stays empty for a short wait, the oldest batch of another
    /// worker's queue; once its own has ended (all producers done), the others' until they are
    /// empty too.
    pub fn recv(&mut self) -> Option<Batch> {
        self.recv_tagged().map(|t| t.batch)
    }

    /// The next batch and the epoch it belongs to (see [`WorkerQueue::recv`]).
    pub(crate) fn recv_tagged(&mut self) -> Option<Tagged> {
        if self.shared.stopped() {
            return None;
        }
        let started = Instant::now();
        let batch = loop {
            match self.channel.get_timeout(STEAL_AFTER) {
                Got::Item(batch) => break Some(batch),
                Got::Empty => {
                    if let Some(batch) = self.steal() {
                        break Some(batch);
                    }
                }
                // Producers close every queue at once (and a stop closes them all), so the
                // others only drain from here on.
                Got::Closed => break self.steal(),
            }
        };
        self.shared
            .wait_nanos
            .fetch_add(nanos(started.elapsed()), Ordering::Relaxed);
        if self.shared.stopped() {
            return None;
        }
        batch
    }

    /// The oldest batch in another worker's queue, looking at the next workers' in turn.
    fn steal(&self) -> Option<Tagged> {
        let channels = &self.shared.channels;
        (1..channels.len()).find_map(|k| {
            match channels[(self.index + k) % channels.len()].try_get() {
                Got::Item(batch) => Some(batch),
                Got::Empty | Got::Closed => None,
            }
        })
    }

    /// This worker's index (0-based).
    pub fn index(&self) -> usize {
        self.index
    }
}

impl Drop for WorkerQueue {
    fn drop(&mut self) {
        // A worker that leaves gets no more batches; readers send to the others.
        self.channel.close();
    }
}

/// Controls a running feed.
pub struct FeedHandle {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl FeedHandle {
    pub(crate) fn new(shared: Arc<Shared>, threads: Vec<JoinHandle<()>>) -> Self {
        FeedHandle { shared, threads }
    }

    /// Stops the feed: readers stop, every worker's next `recv` returns `None`.
    pub fn stop(&self) {
        self.shared.stop_all();
    }

    /// How many leading epochs every reader has moved past: their batch counts are final.
    pub fn sealed_epochs(&self) -> usize {
        self.shared.sealed.load(Ordering::SeqCst)
    }

    /// The batches delivered of epoch `epoch` (0-based) so far; final once it is sealed.
    pub fn epoch_batches(&self, epoch: usize) -> u64 {
        self.shared
            .epoch_batches
            .get(epoch)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Waits for the readers and reports the statistics, or the first error a reader met.
    pub fn join(mut self) -> Result<FeedStats> {
        let mut panicked = false;
        for thread in self.threads.drain(..) {
            panicked |= thread.join().is_err();
        }
        if let Some(error) = self.shared.take_error() {
            return Err(error);
        }
        if panicked {
            return Err(Error::Io {
                path: "data feed".to_string(),
                message: "a reader thread panicked".to_string(),
            });
        }
        self.shared.check_final_budget()?;
        Ok(self.shared.stats())
    }
}

impl Drop for FeedHandle {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shared.stop_all();
            for thread in self.threads.drain(..) {
                let _ = thread.join();
            }
        }
    }
}

/// What a reader reads: a file, or the lines that start in a byte range of a plain one, in the
/// first pass over the files or a later one.
pub(crate) struct PieceRead<'a> {
    pub(crate) path: &'a Path,
    pub(crate) range: Option<Range<u64>>,
    pub(crate) first_pass: bool,
}

/// What every reader needs to parse a file.
pub(crate) struct ReadContext {
    pub(crate) parser: LineParser,
    pub(crate) slot_names: Vec<String>,
    pub(crate) pipe_command: String,
}

impl ReadContext {
    pub(crate) fn new(desc: &DataFeedDesc, prefix: LinePrefix) -> Self {
        ReadContext {
            parser: LineParser::new(desc).with_prefix(prefix),
            slot_names: desc.slots().iter().map(|s| s.name.clone()).collect(),
            pipe_command: desc.pipe_command().to_string(),
        }
    }

    pub(crate) fn error(&self, file: &str, line: u64, err: LineError) -> Error {
        Error::Parse {
            file: file.to_string(),
            line,
            slot: err.slot.map(|i| self.slot_names[i].clone()),
            kind: err.kind,
        }
    }

    /// Reads `piece.path` (or, given `piece.range`, the lines of the plain file that start in
    /// that byte range) into `batch`, each instance with its origin, calling `emit` each time it
    /// holds `batch_size` instances (`emit` returns `false` to stop). Returns the lines read, or
    /// `None` if stopped.
    pub(crate) fn read_file(
        &self,
        shared: &Shared,
        piece: PieceRead<'_>,
        batch: &mut Batch,
        batch_size: usize,
        emit: &mut dyn FnMut(&mut Batch) -> bool,
    ) -> Result<Option<u64>> {
        let PieceRead {
            path,
            range,
            first_pass,
        } = piece;
        let mut source = match range {
            Some(range) => Source::open_range(path, range)?,
            None => Source::open(path, &self.pipe_command)?,
        };
        let name = Arc::new(source.piece_name());
        let mut line = Vec::with_capacity(1 << 12);
        let mut line_no = 0u64;
        let (mut lines, mut bytes) = (0u64, 0u64);
        let flush = |lines: &mut u64, bytes: &mut u64| {
            shared.lines.fetch_add(*lines, Ordering::Relaxed);
            if first_pass {
                shared.pass_lines.fetch_add(*lines, Ordering::Relaxed);
            }
            shared.bytes.fetch_add(*bytes, Ordering::Relaxed);
            *lines = 0;
            *bytes = 0;
        };
        while source.read_line(&mut line)? {
            line_no += 1;
            lines += 1;
            bytes += line.len() as u64 + 1;
            if let Err(err) = self.parser.parse_into(&line, batch) {
                flush(&mut lines, &mut bytes);
                let line = source.line_base()? + line_no;
                let error = self.error(source.name(), line, err);
                if source.is_piped() && matches!(shared.policy, ErrorPolicy::Strict) {
                    // A command that failed explains the garbage better than the garbage does.
                    source.finish()?;
                }
                shared.bad_line(error, first_pass)?;
                continue;
            }
            batch.origin.push_line(batch.len - 1, &name, line_no);
            if batch.len >= batch_size {
                flush(&mut lines, &mut bytes);
                if !emit(batch) {
                    return Ok(None);
                }
            }
            if line_no & 4095 == 0 && shared.stopped() {
                return Ok(None);
            }
        }
        flush(&mut lines, &mut bytes);
        source.finish()?;
        if let Some(note) = source.take_stderr().filter(|_| first_pass) {
            shared
                .pipe_stderr
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(note);
        }
        Ok(Some(line_no))
    }
}

/// The instances in `files` as `desc` reads them (one per line, through the desc's
/// `pipe_command`): what a streaming run holds per epoch, for a model whose learning rate decays
/// over the run. Reads every file once.
pub fn count_instances(desc: &DataFeedDesc, files: &[PathBuf]) -> Result<u64> {
    let mut line = Vec::with_capacity(1 << 12);
    let mut lines = 0u64;
    for path in files {
        let mut source = Source::open(path, desc.pipe_command())?;
        while source.read_line(&mut line)? {
            lines += 1;
        }
        source.finish()?;
    }
    Ok(lines)
}

/// Starts a feed over `files` for `opts.threads` workers (see the module docs).
pub fn start_feed(
    desc: &DataFeedDesc,
    files: &[PathBuf],
    opts: &FeedOptions,
) -> Result<(Vec<WorkerQueue>, FeedHandle)> {
    desc.validate().map_err(|message| Error::Desc {
        origin: "<in memory>".to_string(),
        message,
    })?;
    if files.is_empty() {
        return Err(Error::Empty {
            what: "data file list",
        });
    }
    let workers = opts.threads.max(1);
    let wanted = if opts.readers == 0 {
        workers
    } else {
        opts.readers
    };
    // A large plain file is read in byte ranges by several readers. A file that cannot be
    // sized here stays whole: its reader reports why when it opens it.
    let pieces: Vec<(PathBuf, Option<Range<u64>>)> =
        plan_pieces(files, desc.pipe_command(), wanted, MIN_PIECE_BYTES)
            .unwrap_or_else(|_| {
                (0..files.len())
                    .map(|file| Piece { file, range: None })
                    .collect()
            })
            .into_iter()
            .map(|p| (files[p.file].clone(), p.range))
            .collect();
    let readers = if opts.readers == 0 {
        workers.min(pieces.len())
    } else {
        opts.readers
    };
    let shared = Shared::new(opts, workers, readers);
    let queue = Arc::new(FileQueue::new(pieces, opts.epochs));
    let context = Arc::new(ReadContext::new(desc, opts.line_prefix));
    let batch_size = opts.batch_size(desc);
    shared.add_producers(readers);
    let threads = (0..readers)
        .map(|r| {
            let (shared, queue, context) = (
                Arc::clone(&shared),
                Arc::clone(&queue),
                Arc::clone(&context),
            );
            let empty = Batch::empty(desc);
            std::thread::spawn(move || {
                let mut distributor = Distributor {
                    next: r % workers,
                    dead: vec![false; workers],
                };
                let result = run_reader(&shared, &queue, &context, empty, batch_size, |b| {
                    distributor.send(&shared, b)
                });
                // A reader that stopped early has not left its epochs: they stay unsealed.
                if let Err(error) = result {
                    shared.fail(error);
                }
                shared.producer_done();
            })
        })
        .collect();
    let queues = WorkerQueue::all(&shared);
    Ok((queues, FeedHandle::new(shared, threads)))
}

fn run_reader(
    shared: &Shared,
    queue: &FileQueue<(PathBuf, Option<Range<u64>>)>,
    context: &ReadContext,
    mut batch: Batch,
    batch_size: usize,
    mut send: impl FnMut(Tagged) -> bool,
) -> Result<()> {
    // Time spent handing batches over (waiting on full queues) is not reading or parsing.
    let handing_over = std::cell::Cell::new(Duration::ZERO);
    let epoch = std::cell::Cell::new(0usize);
    let mut emit = |b: &mut Batch| {
        let started = Instant::now();
        let ok = send(Tagged {
            epoch: epoch.get(),
            batch: b.take(),
        });
        handing_over.set(handing_over.get() + started.elapsed());
        ok
    };
    // Sends the partial batch of the current epoch and leaves every epoch before `next`.
    let move_to = |next: usize, batch: &mut Batch, emit: &mut dyn FnMut(&mut Batch) -> bool| {
        if batch.len > 0 && !emit(batch) {
            return false;
        }
        for e in epoch.get()..next.min(shared.epoch_batches.len()) {
            shared.leave_epoch(e);
        }
        epoch.set(next);
        true
    };
    while let Some(((path, range), e)) = queue.next_with_epoch() {
        if shared.stopped() {
            return Ok(());
        }
        if e != epoch.get() && !move_to(e, &mut batch, &mut emit) {
            return Ok(());
        }
        let started = Instant::now();
        handing_over.set(Duration::ZERO);
        let piece = PieceRead {
            path,
            range: range.clone(),
            first_pass: e == 0,
        };
        let finished = context.read_file(shared, piece, &mut batch, batch_size, &mut emit);
        shared.add_read_time(started.elapsed().saturating_sub(handing_over.get()));
        if finished?.is_none() {
            return Ok(());
        }
    }
    move_to(shared.epoch_batches.len(), &mut batch, &mut emit);
    Ok(())
}

/// A batch on its way to a worker, with the epoch it belongs to.
pub(crate) struct Tagged {
    pub(crate) epoch: usize,
    pub(crate) batch: Batch,
}

impl ByteSize for Tagged {
    fn byte_size(&self) -> usize {
        self.batch.byte_size()
    }
}

/// Spreads one reader's batches over the worker queues: the next worker in turn if it has room,
/// else any worker with room, else wait on the one in turn. Workers that left are skipped.
struct Distributor {
    next: usize,
    dead: Vec<bool>,
}

impl Distributor {
    fn send(&mut self, shared: &Shared, mut batch: Tagged) -> bool {
        let n = self.dead.len();
        loop {
            if shared.stopped() {
                return false;
            }
            for k in 0..n {
                let target = (self.next + k) % n;
                if self.dead[target] {
                    continue;
                }
                let (epoch, len) = (batch.epoch, batch.batch.len as u64);
                match shared.channels[target].try_put(batch) {
                    Ok(()) => {
                        shared.delivered(epoch, len);
                        self.next = (target + 1) % n;
                        return true;
                    }
                    Err(TryPutError::Full(b)) => batch = b,
                    Err(TryPutError::Closed(b)) => {
                        self.dead[target] = true;
                        batch = b;
                    }
                }
            }
            let Some(target) = (0..n).map(|k| (self.next + k) % n).find(|&t| !self.dead[t]) else {
                return false;
            };
            self.next = (target + 1) % n;
            // Blocking put; on a closed queue, mark it and try the others again.
            let (epoch, len) = (batch.epoch, batch.batch.len as u64);
            let started = Instant::now();
            match shared.channels[target].put(batch) {
                Ok(()) => {
                    shared
                        .blocked_nanos
                        .fetch_add(nanos(started.elapsed()), Ordering::Relaxed);
                    shared.delivered(epoch, len);
                    return true;
                }
                Err(e) => {
                    self.dead[target] = true;
                    batch = e.0;
                }
            }
        }
    }
}
