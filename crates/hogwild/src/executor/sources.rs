//! The run loop's three batch sources: a stream of files, an in-memory dataset shuffled and shared
//! by the workers, and files read in order for predictions.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::run::{BatchSource, Ticket};
use crate::feed::{
    start_feed, Batch, DataFeedDesc, FeedHandle, FeedOptions, FeedStats, InMemoryDataset,
    WorkerQueue, BAD_EXAMPLES,
};
use crate::files::Output;
use crate::rng::{shuffle, SplitMix64};
use crate::{Error, Result};

/// The streaming feed: every worker takes from its own queue (and from the others' when its own
/// is empty); an epoch's count is known once every reader has moved past it.
pub(crate) struct Stream {
    queues: Vec<Mutex<Option<WorkerQueue>>>,
    feed: FeedHandle,
}

impl Stream {
    /// Starts the feed over `files` for `threads` workers.
    pub(crate) fn start(
        desc: &DataFeedDesc,
        files: &[PathBuf],
        options: &FeedOptions,
        threads: usize,
    ) -> Result<Self> {
        let mut options = options.clone();
        options.threads = threads;
        let (queues, feed) = start_feed(desc, files, &options)?;
        Ok(Self {
            queues: queues.into_iter().map(|q| Mutex::new(Some(q))).collect(),
            feed,
        })
    }

    /// Waits for the readers: their statistics, or the first error one met.
    pub(crate) fn finish(self) -> Result<FeedStats> {
        drop(self.queues);
        self.feed.join()
    }
}

impl BatchSource for Stream {
    /// The worker's queue; it closes when the worker ends, so readers stop sending to it.
    type Cursor = Option<WorkerQueue>;

    fn cursor(&self, worker: usize) -> Self::Cursor {
        self.queues[worker]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    fn next(&self, queue: &mut Self::Cursor, batch: &mut Batch) -> Result<Option<Ticket>> {
        let Some(tagged) = queue.as_mut().and_then(|q| q.recv_tagged()) else {
            return Ok(None);
        };
        *batch = tagged.batch;
        Ok(Some(Ticket {
            epoch: tagged.epoch,
            seq: 0,
        }))
    }

    fn sealed_epochs(&self) -> usize {
        self.feed.sealed_epochs()
    }

    fn epoch_batches(&self, epoch: usize) -> u64 {
        self.feed.epoch_batches(epoch)
    }

    fn stop(&self) {
        self.feed.stop();
    }
}

/// Worker `w`'s share of `n` instances: the `w`-th of `threads` contiguous ranges of the order.
fn share(n: usize, threads: usize, w: usize) -> std::ops::Range<usize> {
    w * n / threads..(w + 1) * n / threads
}

/// The seed of share `w`'s shuffle in epoch `epoch` (0-based, above 0) of a run seeded `seed`.
fn pass_seed(seed: u64, w: usize, epoch: usize) -> u64 {
    let mut mix = SplitMix64(seed ^ (w as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    mix.next() ^ (epoch as u64).wrapping_mul(0x9FB2_1C65_1E98_DF25)
}

/// An in-memory dataset served for every epoch of a run with no reader thread and no queue.
///
/// The instances are shuffled once (seeded) and split into one contiguous share per worker. A
/// worker's batches for the whole run are its share's passes one after another: the first in the
/// shared shuffle's order, each later one reshuffled with a generator seeded by the run's seed,
/// the share and the epoch, so any thread can lay out any share's pass. Workers never wait on
/// each other (an epoch ends when its last batch is trained) and allocate nothing per batch.
///
/// Workers claim their share's batches one at a time from an atomic counter; a worker whose
/// batches are all claimed claims the next ones of the worker with the most left (work
/// stealing), as long as the time that saves outweighs laying out that worker's pass. So a
/// thread slowed by the machine does not hold up the run, and every epoch still trains every
/// instance once. Which thread trains a batch can change from run to run; what the batches hold
/// does not.
///
/// The claims are counters rather than crossbeam-deque's queues: a deque holds every task it
/// hands out, which for a run is every batch of every epoch (a billion instances in batches of
/// 64 for 10 epochs: 156 million tasks, over a gigabyte), where a counter per worker takes 128
/// bytes and lays out a pass only when a thread reaches it.
pub(crate) struct Memory<'a> {
    data: &'a InMemoryDataset,
    first: Vec<u32>,
    claims: Vec<CachePadded<Claims>>,
    threads: usize,
    batch_size: usize,
    seed: Option<u64>,
    batches_per_epoch: u64,
    /// Batches hold their instances by record number alone ([`Memory::refer_only`]).
    refer: bool,
    stopped: AtomicBool,
    started: Instant,
}

/// One share's batches for the whole run, claimed one at a time by any thread.
struct Claims {
    /// The next unclaimed batch: `epoch * per_epoch + batch`.
    next: AtomicUsize,
    /// Batches in one pass over the share.
    per_epoch: usize,
    /// `per_epoch` times the epochs.
    total: usize,
}

impl Claims {
    /// Claims the next batch: its (epoch, batch in the pass), or `None` when all are claimed.
    fn claim(&self) -> Option<(usize, usize)> {
        // Relaxed: the counter hands out distinct batches; no data is published through it.
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        (k < self.total).then(|| (k / self.per_epoch, k % self.per_epoch))
    }

    /// Batches not yet claimed.
    fn left(&self) -> usize {
        self.total.saturating_sub(self.next.load(Ordering::Relaxed))
    }

    /// The epoch of the next unclaimed batch.
    fn front_epoch(&self) -> usize {
        self.next.load(Ordering::Relaxed) / self.per_epoch.max(1)
    }
}

/// A thread's cursor: the share it claims from, its layout of one share's pass (the order its
/// batches are cut from) and what laying it out last cost, and its pace.
pub(crate) struct MemoryCursor {
    from: usize,
    key: Option<(usize, usize)>,
    order: Vec<u32>,
    cost: f64,
    batches: u64,
}

impl<'a> Memory<'a> {
    /// Serves `data` for `epochs` epochs to `threads` workers in batches of `batch_size`,
    /// shuffled with `seed` (`None`: file order).
    pub(crate) fn new(
        data: &'a InMemoryDataset,
        threads: usize,
        epochs: usize,
        batch_size: usize,
        seed: Option<u64>,
    ) -> Result<Self> {
        let n = data.len();
        if n == 0 {
            return Err(Error::Empty {
                what: "training data",
            });
        }
        let n32 = u32::try_from(n).map_err(|_| Error::InvalidConfig {
            field: "mode".into(),
            reason: format!("{n} instances, at most {} fit in memory mode", u32::MAX),
        })?;
        let threads = threads.max(1);
        let batch_size = batch_size.max(1);
        let mut first: Vec<u32> = (0..n32).collect();
        if let Some(seed) = seed {
            shuffle(&mut first, &mut SplitMix64(seed));
        }
        let claims: Vec<CachePadded<Claims>> = (0..threads)
            .map(|w| {
                let per_epoch = share(n, threads, w).len().div_ceil(batch_size);
                CachePadded::new(Claims {
                    next: AtomicUsize::new(0),
                    per_epoch,
                    total: per_epoch * epochs,
                })
            })
            .collect();
        let batches_per_epoch = claims.iter().map(|c| c.per_epoch as u64).sum();
        Ok(Self {
            data,
            first,
            claims,
            threads,
            batch_size,
            seed,
            batches_per_epoch,
            refer: false,
            stopped: AtomicBool::new(false),
            started: Instant::now(),
        })
    }

    /// Serves batches that hold their instances by record number alone, for a model that
    /// prepared the dataset ([`crate::Model::prepare_dataset`]): the same instances in the same
    /// batches, without copying their values.
    pub(crate) fn refer_only(&mut self) {
        self.refer = true;
    }

    /// Bytes held besides the dataset: the shared shuffle and the threads' pass layouts.
    pub(crate) fn order_bytes(&self) -> usize {
        self.first.len() * std::mem::size_of::<u32>() * 2
    }

    /// Lays out share `w`'s pass of `epoch` into the cursor, unless it holds it already.
    fn prepare(&self, c: &mut MemoryCursor, w: usize, epoch: usize) {
        if c.key == Some((w, epoch)) {
            return;
        }
        let t0 = Instant::now();
        c.order.clear();
        c.order
            .extend_from_slice(&self.first[share(self.first.len(), self.threads, w)]);
        if let Some(seed) = self.seed.filter(|_| epoch > 0) {
            shuffle(&mut c.order, &mut SplitMix64(pass_seed(seed, w, epoch)));
        }
        c.key = Some((w, epoch));
        c.cost = t0.elapsed().as_secs_f64();
    }

    /// The share to steal from: the one with the most batches left, if the time saved (half of
    /// what it has left, at this thread's pace) beats laying out its pass.
    fn victim(&self, c: &MemoryCursor) -> Option<usize> {
        let per_batch = self.started.elapsed().as_secs_f64() / c.batches.max(1) as f64;
        (0..self.threads)
            .filter(|&v| v != c.from)
            .map(|v| (self.claims[v].left(), v))
            .filter(|&(left, v)| {
                let layout = if c.key == Some((v, self.claims[v].front_epoch())) {
                    0.0
                } else {
                    c.cost
                };
                left > 1 && left as f64 * per_batch / 2.0 > layout
            })
            .max()
            .map(|(_, v)| v)
    }
}

impl BatchSource for Memory<'_> {
    type Cursor = MemoryCursor;

    fn cursor(&self, worker: usize) -> MemoryCursor {
        MemoryCursor {
            from: worker,
            key: None,
            order: Vec::with_capacity(share(self.first.len(), self.threads, worker).len() + 1),
            cost: 0.0,
            batches: 0,
        }
    }

    fn next(&self, c: &mut MemoryCursor, batch: &mut Batch) -> Result<Option<Ticket>> {
        let (epoch, b) = loop {
            if self.stopped.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(claimed) = self.claims[c.from].claim() {
                break claimed;
            }
            match self.victim(c) {
                Some(v) => c.from = v,
                None => return Ok(None),
            }
        };
        self.prepare(c, c.from, epoch);
        let end = ((b + 1) * self.batch_size).min(c.order.len());
        batch.clear();
        let order = &c.order[b * self.batch_size..end];
        match self.refer {
            true => self.data.refer(batch, order),
            false => self.data.gather(batch, order),
        }
        c.batches += 1;
        Ok(Some(Ticket { epoch, seq: 0 }))
    }

    fn sealed_epochs(&self) -> usize {
        usize::MAX
    }

    fn epoch_batches(&self, _epoch: usize) -> u64 {
        self.batches_per_epoch
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

/// Batches per thread the reorder buffer may hold.
const WINDOW_PER_THREAD: usize = 4;

/// Files read in order for predictions: each file is loaded into memory in turn and cut into
/// batches numbered in file order; threads take the next number, evaluate that batch into their
/// own text buffer and hand it back, and a reorder buffer writes batches strictly by number. A
/// thread never runs more than a window of batches ahead of the oldest unwritten one, so the
/// buffer stays small; the thread holding the oldest batch never waits, so no thread waits
/// forever. Memory holds one file at a time.
///
/// A line skipped as bad (under [`crate::feed::ErrorPolicy::Skip`]) gets an empty line in the
/// output, so that output line `n` is always the prediction of input line `n` (counting the
/// files' lines one after another); the budget holds over all files together.
pub(crate) struct InOrder<'a> {
    desc: &'a DataFeedDesc,
    files: &'a [PathBuf],
    load: FeedOptions,
    batch_size: usize,
    current: Mutex<Current>,
    /// 1 once every file is loaded: the run's one epoch then has a known count.
    sealed: AtomicUsize,
    stopped: AtomicBool,
    reorder: Mutex<Reorder<'a>>,
    written: Condvar,
    window: usize,
}

/// The file being served.
#[derive(Default)]
struct Current {
    /// Files loaded so far.
    file: usize,
    data: Option<Arc<InMemoryDataset>>,
    /// Its batches, the next one to hand out, and the number of its first.
    count: usize,
    next: usize,
    first: usize,
    stats: FeedStats,
    data_bytes: usize,
    /// Skipped lines not yet given their empty output lines: the last file's lines after its
    /// last instance, and every line of files without an instance. They go before the next
    /// file's first instance, or at the end.
    carry: u64,
}

struct Reorder<'a> {
    next: usize,
    pending: BTreeMap<usize, String>,
    /// Per batch number: the empty lines for skipped input lines to write before its instances
    /// (instance in the batch, lines), for batches that follow skipped lines.
    gaps: BTreeMap<usize, Vec<(usize, u64)>>,
    /// Per batch number: its instances' ids, when the lines carry them (see
    /// [`crate::feed::LinePrefix`]); each prediction line is written after its id and a tab.
    ids: BTreeMap<usize, Vec<String>>,
    out: &'a mut Output,
}

/// Lines of `data` after its last instance, which were skipped as bad.
fn trailing_skipped(data: &InMemoryDataset) -> u64 {
    let last = match data.len() {
        0 => 0,
        n => data.origin(n - 1).map_or(0, |(_, line)| line),
    };
    data.load_stats().lines.saturating_sub(last)
}

/// Writes `text` (one line per instance) to `out` with `gaps[j].1` empty lines before instance
/// `gaps[j].0` (increasing), and each line after `ids[j]` and a tab when there are ids.
fn write_with_gaps(
    out: &mut impl Write,
    text: &str,
    gaps: &[(usize, u64)],
    ids: &[String],
) -> std::io::Result<()> {
    let mut gaps = gaps.iter().peekable();
    for (j, line) in text.split_inclusive('\n').enumerate() {
        if let Some((_, blanks)) = gaps.next_if(|(at, _)| *at == j) {
            out.write_all("\n".repeat(*blanks as usize).as_bytes())?;
        }
        if let Some(id) = ids.get(j) {
            out.write_all(id.as_bytes())?;
            out.write_all(b"\t")?;
        }
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

impl<'a> InOrder<'a> {
    /// Predictions of `files` to `out`, for `threads` threads.
    pub(crate) fn new(
        desc: &'a DataFeedDesc,
        files: &'a [PathBuf],
        options: &FeedOptions,
        threads: usize,
        out: &'a mut Output,
    ) -> Result<Self> {
        if files.is_empty() {
            return Err(Error::Empty {
                what: "data file list",
            });
        }
        let mut load = options.clone();
        load.threads = threads;
        Ok(Self {
            desc,
            files,
            batch_size: options.batch_size(desc),
            load,
            current: Mutex::new(Current::default()),
            sealed: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            reorder: Mutex::new(Reorder {
                next: 0,
                pending: BTreeMap::new(),
                gaps: BTreeMap::new(),
                ids: BTreeMap::new(),
                out,
            }),
            written: Condvar::new(),
            window: WINDOW_PER_THREAD * threads.max(1),
        })
    }

    fn write_error(out: &Output, e: std::io::Error) -> Error {
        Error::Io {
            path: out.name().to_string(),
            message: format!("cannot write predictions: {e}"),
        }
    }

    /// Writes what is left (the empty lines of the last skipped lines included; the caller
    /// commits the output) and reports the loads: lines, bytes, bad lines and read time, and the
    /// largest file's bytes in memory.
    pub(crate) fn finish(self) -> Result<(FeedStats, usize)> {
        let mut c = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(data) = c.data.take() {
            c.carry += trailing_skipped(&data);
        }
        let mut r = self.reorder.lock().unwrap_or_else(|p| p.into_inner());
        let blanks = "\n".repeat(c.carry as usize);
        r.out
            .write_all(blanks.as_bytes())
            .and_then(|()| r.out.flush())
            .map_err(|e| Self::write_error(r.out, e))?;
        Ok((std::mem::take(&mut c.stats), c.data_bytes))
    }

    /// The next batch number, the file it is in, and the lines skipped before the file's first
    /// instance that are not written yet (for its first batch); loads files as they are reached.
    fn claim(&self) -> Result<Option<Claimed>> {
        let mut c = self.current.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.stopped.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(data) = c.data.as_ref().filter(|_| c.next < c.count) {
                let data = Arc::clone(data);
                let k = c.next;
                c.next += 1;
                let carry = if k == 0 {
                    std::mem::take(&mut c.carry)
                } else {
                    0
                };
                return Ok(Some(Claimed {
                    data,
                    k,
                    seq: c.first + k,
                    carry,
                }));
            }
            let Some(path) = self.files.get(c.file) else {
                return Ok(None);
            };
            // The other threads wait here while a file loads (with its own reader threads).
            if let Some(done) = c.data.take() {
                c.carry += trailing_skipped(&done);
            }
            // A file that fails stops the source at once: another thread must not load it again
            // (and count its lines twice) while the run is stopping.
            let failed = |e| {
                self.stopped.store(true, Ordering::Relaxed);
                e
            };
            let data = InMemoryDataset::load(self.desc, std::slice::from_ref(path), &self.load)
                .map_err(failed)?;
            let stats = data.load_stats();
            c.stats.lines += stats.lines;
            c.stats.bytes += stats.bytes;
            c.stats.read_time += stats.read_time;
            c.stats.bad_lines += stats.bad_lines;
            let room = BAD_EXAMPLES.saturating_sub(c.stats.bad_examples.len());
            c.stats
                .bad_examples
                .extend(stats.bad_examples.iter().take(room).cloned());
            c.stats
                .pipe_stderr
                .extend(stats.pipe_stderr.iter().cloned());
            // Each file's load holds the budget; together they must too.
            let at_end = c.file + 1 == self.files.len();
            let (bad, lines) = (c.stats.bad_lines, c.stats.lines);
            let first = || c.stats.bad_examples.first().cloned().unwrap_or_default();
            self.load
                .errors
                .over_budget(bad, lines, at_end, first)
                .map_err(failed)?;
            c.data_bytes = c.data_bytes.max(data.byte_size());
            c.first += c.count;
            c.count = data.len().div_ceil(self.batch_size);
            c.next = 0;
            c.file += 1;
            c.data = Some(Arc::new(data));
            if c.file == self.files.len() {
                self.sealed.store(1, Ordering::SeqCst);
            }
        }
    }
}

/// A batch to predict: the file's dataset, the batch's number in the file and in the run, and
/// the skipped lines before it that are not written yet (see [`Current::carry`]).
struct Claimed {
    data: Arc<InMemoryDataset>,
    k: usize,
    seq: usize,
    carry: u64,
}

/// The empty lines before each instance of `instances` of `data` for the lines skipped before it
/// (`carry` more before the file's first): (instance in the batch, lines), where there are any.
fn skipped_before(
    data: &InMemoryDataset,
    instances: std::ops::Range<usize>,
    carry: u64,
) -> Vec<(usize, u64)> {
    let mut gaps = Vec::new();
    // Without a skipped line of its own, a file's instances are its lines one after another.
    let none_skipped = data.load_stats().bad_lines == 0;
    for (j, i) in instances.enumerate() {
        let extra = if i == 0 { carry } else { 0 };
        let skipped = if none_skipped {
            0
        } else {
            let line = |i: usize| data.origin(i).map_or(0, |(_, line)| line);
            let before = if i == 0 { 0 } else { line(i - 1) };
            line(i).saturating_sub(before + 1)
        };
        if extra + skipped > 0 {
            gaps.push((j, extra + skipped));
        }
    }
    gaps
}

impl BatchSource for InOrder<'_> {
    type Cursor = ();

    fn cursor(&self, _worker: usize) {}

    fn next(&self, _: &mut (), batch: &mut Batch) -> Result<Option<Ticket>> {
        let Some(Claimed {
            data,
            k,
            seq,
            carry,
        }) = self.claim()?
        else {
            return Ok(None);
        };
        let instances = k * self.batch_size..((k + 1) * self.batch_size).min(data.len());
        let gaps = skipped_before(&data, instances.clone(), carry);
        // Waits until batch `seq` is within the window of the oldest unwritten batch.
        let mut r = self.reorder.lock().unwrap_or_else(|p| p.into_inner());
        while seq >= r.next + self.window && !self.stopped.load(Ordering::Relaxed) {
            r = self
                .written
                .wait_timeout(r, Duration::from_millis(20))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if !gaps.is_empty() {
            r.gaps.insert(seq, gaps);
        }
        if data.ins_id(instances.start).is_some() {
            let ids = instances.clone().filter_map(|i| data.ins_id(i));
            let ids = ids.map(|id| String::from_utf8_lossy(id).into_owned());
            r.ids.insert(seq, ids.collect());
        }
        drop(r);
        batch.clear();
        for i in instances {
            data.push_to(batch, i);
        }
        Ok(Some(Ticket { epoch: 0, seq }))
    }

    fn sealed_epochs(&self) -> usize {
        self.sealed.load(Ordering::SeqCst)
    }

    fn epoch_batches(&self, _epoch: usize) -> u64 {
        let c = self.current.lock().unwrap_or_else(|p| p.into_inner());
        (c.first + c.count) as u64
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.written.notify_all();
    }

    fn wants_lines(&self) -> bool {
        true
    }

    /// Hands over batch `ticket.seq`'s lines; writes every batch that is now next in order.
    fn submit(&self, ticket: Ticket, lines: String) -> Result<()> {
        let mut r = self.reorder.lock().unwrap_or_else(|p| p.into_inner());
        r.pending.insert(ticket.seq, lines);
        while let Some(text) = {
            let next = r.next;
            r.pending.remove(&next)
        } {
            let next = r.next;
            let gaps = r.gaps.remove(&next).unwrap_or_default();
            let ids = r.ids.remove(&next).unwrap_or_default();
            if let Err(e) = write_with_gaps(&mut *r.out, &text, &gaps, &ids) {
                return Err(Self::write_error(r.out, e));
            }
            r.next += 1;
        }
        drop(r);
        self.written.notify_all();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_instance_once() {
        for (n, threads) in [(10, 3), (1, 2), (7, 7), (1000, 4)] {
            let mut seen: Vec<usize> = (0..threads).flat_map(|w| share(n, threads, w)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{n} over {threads}");
        }
    }

    #[test]
    fn shuffles_are_seeded_permutations() {
        let mut a: Vec<u32> = (0..100).collect();
        let mut b = a.clone();
        shuffle(&mut a, &mut SplitMix64(9));
        shuffle(&mut b, &mut SplitMix64(9));
        assert_eq!(a, b);
        assert_ne!(a, (0..100).collect::<Vec<_>>());
        a.sort_unstable();
        assert_eq!(a, (0..100).collect::<Vec<_>>());
    }
}
