//! Predictions in input order with any number of threads.
//!
//! Each file is loaded into memory in turn and cut into batches numbered in file order. Threads
//! take the next number from a shared counter, evaluate that batch into their own text buffer and
//! hand it to a reorder buffer, which writes batches strictly by number. A thread never runs more
//! than `WINDOW` batches ahead of the oldest unwritten one, so the buffer stays small; the thread
//! holding the oldest batch never waits, so no thread waits forever.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{
    check_threads, fetch_positions, in_threads, step, summarize, Context, RunOptions, RunReport,
};
use crate::feed::{DataFeedDesc, FeedStats, InMemoryDataset};
use crate::model::Model;
use crate::{Error, Result};

/// Batches per thread the reorder buffer may hold.
const WINDOW_PER_THREAD: usize = 4;

/// Writes numbered batches of lines in number order.
struct Reorder {
    state: Mutex<ReorderState>,
    written: Condvar,
    window: usize,
}

struct ReorderState {
    next: usize,
    pending: BTreeMap<usize, String>,
    out: BufWriter<File>,
}

impl Reorder {
    /// Waits until batch `k` is within the window of the oldest unwritten batch, or `stopped()`.
    fn admit(&self, k: usize, stopped: impl Fn() -> bool) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while k >= s.next + self.window && !stopped() {
            s = self
                .written
                .wait_timeout(s, Duration::from_millis(20))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Hands over batch `k`'s lines; writes every batch that is now next in order.
    fn submit(&self, k: usize, lines: String, path: &Path) -> Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.pending.insert(k, lines);
        while let Some(text) = {
            let next = s.next;
            s.pending.remove(&next)
        } {
            s.out.write_all(text.as_bytes()).map_err(|e| Error::Io {
                path: path.display().to_string(),
                message: format!("cannot write predictions: {e}"),
            })?;
            s.next += 1;
        }
        drop(s);
        self.written.notify_all();
        Ok(())
    }
}

pub(super) fn predict_in_order<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    files: &[PathBuf],
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    path: &Path,
) -> Result<RunReport> {
    check_threads(threads)?;
    if files.is_empty() {
        return Err(Error::Empty {
            what: "data file list",
        });
    }
    let names = model.metrics();
    let positions = fetch_positions(names, fetch)?;
    let mut workers = model.workers(desc, threads)?;
    let out = File::create(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        message: format!("cannot create the predictions file: {e}"),
    })?;
    let reorder = Reorder {
        state: Mutex::new(ReorderState {
            next: 0,
            pending: BTreeMap::new(),
            out: BufWriter::new(out),
        }),
        written: Condvar::new(),
        window: WINDOW_PER_THREAD * threads,
    };
    let mut load = options.feed.clone();
    load.threads = threads;
    let batch_size = options.feed.batch_size(desc);
    model.run_metrics();
    let start = Instant::now();
    let mut states = Vec::new();
    let mut feed = FeedStats::default();
    let (mut first_batch, mut data_bytes) = (0usize, 0usize);
    let nothing = || {};
    let ctx = Context::new(names, false, threads, options, &nothing);
    for file in files {
        let data = InMemoryDataset::load(desc, std::slice::from_ref(file), &load)?;
        data_bytes = data_bytes.max(data.byte_size());
        let stats = data.load_stats();
        feed.lines += stats.lines;
        feed.bytes += stats.bytes;
        feed.read_time += stats.read_time;
        let count = data.len().div_ceil(batch_size);
        let next = AtomicUsize::new(0);
        let file_states = in_threads(model, &mut workers, &ctx, |_, worker, t| {
            let mut batch = data.empty_batch();
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= count || ctx.stopped() {
                    return Ok(());
                }
                reorder.admit(first_batch + k, || ctx.stopped());
                let t0 = Instant::now();
                batch.clear();
                for i in k * batch_size..((k + 1) * batch_size).min(data.len()) {
                    data.push_to(&mut batch, i);
                }
                t.wait += t0.elapsed();
                let mut lines = String::new();
                step(model, worker, &ctx, t, &batch, Some(&mut lines))?;
                reorder.submit(first_batch + k, lines, path)?;
            }
        });
        states.extend(file_states);
        if let Some(e) = ctx.take_failure() {
            ctx.reporter.finish();
            return Err(e);
        }
        first_batch += count;
    }
    ctx.reporter.finish();
    let mut s = reorder
        .state
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    s.out.flush().map_err(|e| Error::Io {
        path: path.display().to_string(),
        message: format!("cannot write predictions: {e}"),
    })?;
    let (mut report, wait) = summarize(
        names,
        fetch,
        &positions,
        states,
        start.elapsed(),
        options.debug,
    );
    super::push_run_metrics(model, &mut report.fetched);
    feed.instances = report.instances;
    feed.batches = report.batches;
    feed.worker_wait = wait;
    feed.elapsed = report.elapsed;
    feed.workers = threads;
    report.feed = feed;
    report.data_bytes = data_bytes;
    Ok(report)
}
