//! Training from an in-memory dataset: every epoch of a run in one pass of the machinery, with no
//! reader thread and no queue.
//!
//! The instances are shuffled once (seeded) and split into one contiguous share per worker. A
//! worker's batches for the whole run are its share's passes one after another: the first in the
//! shared shuffle's order, each later one reshuffled with a generator seeded by the run's seed,
//! the share and the epoch, so any thread can lay out any share's pass. Threads start once per
//! run, never wait on each other (an epoch ends when its last batch is trained), and allocate
//! nothing per batch.
//!
//! Workers claim their own batches one at a time from an atomic counter; a worker whose batches
//! are all claimed claims the next ones of the worker with the most left (work stealing), as long
//! as the time that saves outweighs laying out that worker's pass. So a thread slowed by the
//! machine (another process on its core, a slower core) does not hold up the run: the others
//! train the rest of its share, and every epoch still trains every instance once. Which thread
//! trains a batch can change from run to run; what the batches hold does not.
//!
//! Each thread adds its metrics to an epoch's totals when it moves to another epoch's batch or
//! runs out of batches; an epoch is reported (in order) once all its batches are counted. The
//! model's run metrics ([`Model::run_metrics`], e.g. word2vec's `effective_words`) are read when
//! an epoch is reported, so each epoch reports what was gathered since the previous epoch's
//! report: the whole epoch, plus the first batches of the next one that faster workers have
//! already trained. The run reports their sum.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::{
    check_threads, fetch_positions, in_threads, metric_values, push_auc, push_values, step,
    summarize, Context, EpochHook, EpochReport, RunOptions, RunReport, ThreadState,
};
use crate::feed::{DataFeedDesc, FeedStats, InMemoryDataset};
use crate::metrics::Auc;
use crate::model::{Model, RunPlan};
use crate::rng::{shuffle, SplitMix64};
use crate::{Error, Result};

/// Worker `w`'s share of `n` instances: the `w`-th of `threads` contiguous ranges of the order.
fn share(n: usize, threads: usize, w: usize) -> std::ops::Range<usize> {
    w * n / threads..(w + 1) * n / threads
}

/// The seed of share `w`'s shuffle in epoch `epoch` (0-based, above 0) of a run seeded `seed`.
fn pass_seed(seed: u64, w: usize, epoch: usize) -> u64 {
    let mut mix = SplitMix64(seed ^ (w as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    mix.next() ^ (epoch as u64).wrapping_mul(0x9FB2_1C65_1E98_DF25)
}

/// One share's batches for the whole run, claimed one at a time by any thread. Aligned to two
/// cache lines so that one worker's claims do not disturb another's counter.
#[repr(align(128))]
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

/// A thread's layout of one share's pass (the order its batches are cut from), and what laying
/// it out last cost.
struct Pass {
    key: Option<(usize, usize)>,
    order: Vec<u32>,
    cost: f64,
}

impl Pass {
    /// Lays out share `w`'s pass of `epoch` from the run's first shuffle `first`, unless this is
    /// the pass already held.
    fn prepare(
        &mut self,
        first: &[u32],
        threads: usize,
        w: usize,
        epoch: usize,
        seed: Option<u64>,
    ) {
        if self.key == Some((w, epoch)) {
            return;
        }
        let t0 = Instant::now();
        self.order.clear();
        self.order
            .extend_from_slice(&first[share(first.len(), threads, w)]);
        if let Some(seed) = seed.filter(|_| epoch > 0) {
            shuffle(&mut self.order, &mut SplitMix64(pass_seed(seed, w, epoch)));
        }
        self.key = Some((w, epoch));
        self.cost = t0.elapsed().as_secs_f64();
    }
}

/// One epoch's metrics, summed over the threads as they add theirs.
struct EpochTotals {
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
    auc: Auc,
}

/// Every epoch's metrics, the next epoch to report, and the model's run metrics summed over the
/// epochs reported so far.
struct Totals {
    per_epoch: Vec<EpochTotals>,
    reported: usize,
    run: Vec<(&'static str, f64)>,
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

/// What a thread has trained of its current epoch since it last added to the epoch's totals.
struct Since {
    epoch: Option<usize>,
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
}

/// Trains `model` on `data` (laid out by `desc`) for `options.feed.epochs` epochs in `threads`
/// worker threads. `options.feed.in_memory` seeds the shuffles (`None`: file order, no shuffle);
/// `options.feed.batch_size` overrides the desc's. The same seed and thread count give the same
/// batches (whichever thread trains them). `on_epoch` is called once per finished epoch, in order
/// (see [`EpochHook`]); the report lists every epoch's metrics.
pub fn train_dataset<M: Model>(
    model: &M,
    desc: &DataFeedDesc,
    data: &InMemoryDataset,
    threads: usize,
    fetch: &[&str],
    options: &RunOptions,
    on_epoch: Option<&EpochHook<'_>>,
) -> Result<RunReport> {
    check_threads(threads)?;
    let names = model.metrics();
    let positions = fetch_positions(names, fetch)?;
    let n = data.len();
    if n == 0 {
        return Err(Error::Empty {
            what: "training data",
        });
    }
    let n32 = u32::try_from(n).map_err(|_| Error::InvalidConfig {
        field: "in_memory".into(),
        reason: format!("{n} instances, at most {} fit in memory mode", u32::MAX),
    })?;
    let epochs = options.feed.epochs.max(1);
    let count = || Ok(n as u64);
    model.plan(&RunPlan::new(epochs, &count))?;
    let mut workers = model.workers(desc, threads)?;
    let seed = options.feed.in_memory;
    let batch_size = options.feed.batch_size(desc).max(1);
    model.run_metrics();
    let start = Instant::now();
    let mut first: Vec<u32> = (0..n32).collect();
    if let Some(seed) = seed {
        shuffle(&mut first, &mut SplitMix64(seed));
    }
    let claims: Vec<Claims> = (0..threads)
        .map(|w| {
            let per_epoch = share(n, threads, w).len().div_ceil(batch_size);
            Claims {
                next: AtomicUsize::new(0),
                per_epoch,
                total: per_epoch * epochs,
            }
        })
        .collect();
    let batches_per_epoch: u64 = claims.iter().map(|c| c.per_epoch as u64).sum();
    let totals = Mutex::new(Totals {
        per_epoch: (0..epochs)
            .map(|_| EpochTotals {
                sums: vec![0.0; names.len()],
                batches: 0,
                instances: 0,
                auc: Auc::default(),
            })
            .collect(),
        reported: 0,
        run: Vec::new(),
    });
    // Held while a thread calls the hook, so that epochs are reported in order.
    let hooks = Mutex::new(());
    let reports: Mutex<Vec<EpochReport>> = Mutex::new(Vec::with_capacity(epochs));
    let nothing = || {};
    let ctx = Context::new(names, true, threads, options, &nothing);

    // Adds what `t` trained of `since.epoch` to the totals, then reports every epoch whose
    // batches are all counted, in order.
    let settle = |t: &mut ThreadState, worker: &mut M::Worker, since: &mut Since| -> Result<()> {
        let Some(epoch) = since.epoch else {
            return Ok(());
        };
        // The epoch's batches of this thread reach the tables before they are counted.
        model.flush(worker);
        t.drain_auc(model, worker);
        let mut guard = totals.lock().unwrap_or_else(|p| p.into_inner());
        let all = &mut *guard;
        let e = &mut all.per_epoch[epoch];
        for ((s, now), before) in e.sums.iter_mut().zip(&t.sums).zip(&since.sums) {
            *s += now - before;
        }
        e.batches += t.batches - since.batches;
        e.instances += t.instances - since.instances;
        e.auc.merge(std::mem::take(&mut t.auc));
        since.sums.copy_from_slice(&t.sums);
        (since.batches, since.instances) = (t.batches, t.instances);
        let mut ready = Vec::new();
        while all.reported < epochs && all.per_epoch[all.reported].batches == batches_per_epoch {
            let e = &mut all.per_epoch[all.reported];
            let mut fetched = metric_values(
                names,
                &(0..names.len()).collect::<Vec<_>>(),
                &e.sums,
                e.instances,
            );
            let mut pairs = std::mem::take(&mut e.auc);
            push_auc(&mut fetched, &mut pairs);
            let instances = e.instances;
            let values = model.run_metrics();
            push_values(&mut fetched, &values);
            add_values(&mut all.run, &values);
            all.reported += 1;
            ready.push(EpochReport {
                epoch: all.reported,
                fetched,
                instances,
                elapsed: start.elapsed(),
            });
        }
        if ready.is_empty() {
            return Ok(());
        }
        // Taken before the totals are let go: a thread that reports later epochs waits here.
        let _in_order = hooks.lock().unwrap_or_else(|p| p.into_inner());
        drop(guard);
        for report in ready {
            if let Some(hook) = on_epoch {
                hook(&report)?;
            }
            reports
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(report);
        }
        Ok(())
    };

    let states = in_threads(model, &mut workers, &ctx, |thread, worker, t| {
        let mut pass = Pass {
            key: None,
            order: Vec::with_capacity(share(n, threads, thread).len() + 1),
            cost: 0.0,
        };
        let mut batch = data.empty_batch();
        let mut since = Since {
            epoch: None,
            sums: vec![0.0; names.len()],
            batches: 0,
            instances: 0,
        };
        let begun = Instant::now();
        let mut from = thread;
        loop {
            if ctx.stopped() {
                return Ok(());
            }
            let claimed = match claims[from].claim() {
                Some(c) => Some(c),
                None => {
                    // Steal from the worker with the most batches left, if the time saved (half
                    // of what it has left, at this thread's pace) beats laying out its pass.
                    let per_batch = begun.elapsed().as_secs_f64() / t.batches.max(1) as f64;
                    let victim = (0..threads)
                        .filter(|&v| v != from)
                        .map(|v| (claims[v].left(), v))
                        .filter(|&(left, v)| {
                            let layout = if pass.key == Some((v, claims[v].front_epoch())) {
                                0.0
                            } else {
                                pass.cost
                            };
                            left > 1 && left as f64 * per_batch / 2.0 > layout
                        })
                        .max();
                    match victim {
                        Some((_, v)) => {
                            from = v;
                            continue;
                        }
                        None => None,
                    }
                }
            };
            let Some((epoch, b)) = claimed else { break };
            if since.epoch != Some(epoch) {
                settle(t, worker, &mut since)?;
                since.epoch = Some(epoch);
            }
            pass.prepare(&first, threads, from, epoch, seed);
            let chunk = &pass.order[b * batch_size..((b + 1) * batch_size).min(pass.order.len())];
            let t0 = Instant::now();
            batch.clear();
            data.gather(&mut batch, chunk);
            let gathered = t0.elapsed();
            t.wait += gathered;
            t.stages.read += gathered;
            step(model, worker, &ctx, t, &batch, None)?;
        }
        settle(t, worker, &mut since)
    });
    ctx.reporter.finish();
    if let Some(e) = ctx.take_failure() {
        return Err(e);
    }
    let (mut report, wait) = summarize(
        names,
        fetch,
        &positions,
        states,
        start.elapsed(),
        options.debug,
    );
    // Each epoch's pairs went to its own report: the run's AUC is the last epoch's.
    let epochs_done = reports.into_inner().unwrap_or_else(|p| p.into_inner());
    let want_auc = fetch.is_empty() || fetch.contains(&"auc");
    if let Some(last) = epochs_done
        .last()
        .and_then(|e| e.get("auc"))
        .filter(|_| want_auc)
    {
        match report.fetched.iter_mut().find(|(n, _)| n == "auc") {
            Some(entry) => entry.1 = last,
            None => report.fetched.push(("auc".into(), last)),
        }
    }
    let mut run = totals.into_inner().unwrap_or_else(|p| p.into_inner()).run;
    add_values(&mut run, &model.run_metrics());
    push_values(&mut report.fetched, &run);
    let load = data.load_stats();
    report.feed = FeedStats {
        instances: report.instances,
        batches: report.batches,
        lines: load.lines,
        bytes: load.bytes,
        bad_lines: load.bad_lines,
        bad_examples: load.bad_examples.clone(),
        read_time: load.read_time,
        worker_wait: wait,
        elapsed: report.elapsed,
        workers: threads,
        ..FeedStats::default()
    };
    report.data_bytes = data.byte_size() + n * std::mem::size_of::<u32>() * 2;
    report.epochs = epochs_done;
    if options.debug {
        super::report::print_stages(&report, threads);
    }
    Ok(report)
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
