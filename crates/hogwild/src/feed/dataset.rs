//! The in-memory dataset: files are parsed once, then every epoch is a seeded shuffle of the
//! instances, split into one contiguous share per worker, served without touching the files again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::batch::Batch;
use super::desc::DataFeedDesc;
use super::reader::{FeedHandle, FeedOptions, FeedStats, ReadContext, Shared, WorkerQueue};
use crate::rng::{shuffle, SplitMix64};
use crate::{Error, Result};

/// All instances of a set of files, parsed and held in memory.
pub struct InMemoryDataset {
    desc: DataFeedDesc,
    data: Arc<Batch>,
    load_stats: FeedStats,
}

impl InMemoryDataset {
    /// Parses every file (in parallel, `opts.readers` or `opts.threads` threads) under
    /// `opts.errors`; instances keep the files' order.
    pub fn load(desc: &DataFeedDesc, files: &[PathBuf], opts: &FeedOptions) -> Result<Self> {
        desc.validate().map_err(|message| Error::Desc {
            origin: "<in memory>".to_string(),
            message,
        })?;
        let readers = if opts.readers == 0 {
            opts.threads.max(1)
        } else {
            opts.readers
        }
        .min(files.len())
        .max(1);
        let shared = Shared::new(opts, 0);
        let context = ReadContext::new(desc);
        let next = AtomicUsize::new(0);
        let parts: Mutex<Vec<Option<Batch>>> = Mutex::new(vec![None; files.len()]);
        std::thread::scope(|scope| {
            for _ in 0..readers {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= files.len() || shared.stopped() {
                        break;
                    }
                    let started = Instant::now();
                    let mut part = Batch::empty(desc);
                    let result =
                        context.read_file(&shared, &files[i], &mut part, usize::MAX, &mut |_| true);
                    shared.add_read_time(started.elapsed());
                    match result {
                        Ok(_) => parts.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(part),
                        Err(error) => shared.fail(error),
                    }
                });
            }
        });
        if let Some(error) = shared.take_error() {
            return Err(error);
        }
        let mut data = Batch::empty(desc);
        for part in parts
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .flatten()
        {
            data.append(&part);
        }
        let load_stats = shared.stats();
        Ok(InMemoryDataset {
            desc: desc.clone(),
            data: Arc::new(data),
            load_stats,
        })
    }

    /// Number of instances held.
    pub fn len(&self) -> usize {
        self.data.len
    }

    /// Whether no instance is held.
    pub fn is_empty(&self) -> bool {
        self.data.len == 0
    }

    /// What loading read: lines, bytes, bad lines, read time.
    pub fn load_stats(&self) -> &FeedStats {
        &self.load_stats
    }

    /// All instances as one batch, in file order.
    pub fn as_batch(&self) -> &Batch {
        &self.data
    }

    /// Serves `opts.epochs` epochs to `opts.threads` workers. Each epoch shuffles the instances
    /// (seeded by `opts.in_memory`; `None` keeps file order) and gives worker `w` the `w`-th
    /// contiguous share of the order. The same seed gives the same batches.
    pub fn start(&self, opts: &FeedOptions) -> (Vec<WorkerQueue>, FeedHandle) {
        let workers = opts.threads.max(1);
        let shared = Shared::new(opts, workers);
        let data = Arc::clone(&self.data);
        let batch_size = opts.batch_size(&self.desc);
        let (epochs, seed) = (opts.epochs, opts.in_memory);
        let producer_shared = Arc::clone(&shared);
        shared.add_producers(1);
        let thread = std::thread::spawn(move || {
            let shared = producer_shared;
            let mut rng = SplitMix64(seed.unwrap_or(0));
            let mut order: Vec<usize> = (0..data.len).collect();
            for _ in 0..epochs {
                if seed.is_some() {
                    shuffle(&mut order, &mut rng);
                }
                let alive = std::thread::scope(|scope| {
                    let handles: Vec<_> = (0..workers)
                        .map(|w| {
                            let share =
                                &order[w * order.len() / workers..(w + 1) * order.len() / workers];
                            let (shared, data) = (&shared, &data);
                            scope.spawn(move || serve(shared, data, share, batch_size, w))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().unwrap_or(false))
                        .fold(false, |any, ok| any | ok)
                });
                if !alive || shared.stopped() {
                    break;
                }
            }
            shared.producer_done();
        });
        (
            WorkerQueue::all(&shared),
            FeedHandle::new(shared, vec![thread]),
        )
    }
}

/// Gathers `share` into batches for worker `w`. Returns `false` if the worker left or the feed
/// stopped.
fn serve(shared: &Shared, data: &Batch, share: &[usize], batch_size: usize, w: usize) -> bool {
    for chunk in share.chunks(batch_size) {
        let started = Instant::now();
        let mut batch = Batch::empty_like(data);
        for &i in chunk {
            batch.push_instance(data, i);
        }
        shared.add_read_time(started.elapsed());
        if !shared.put_to(w, batch) {
            return false;
        }
    }
    true
}
