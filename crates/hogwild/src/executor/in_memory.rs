//! Training from an in-memory dataset: every epoch of a run in one pass of the machinery, with no
//! reader thread and no queue.
//!
//! The instances are shuffled once (seeded) and split into one contiguous share per worker; each
//! worker keeps its share's indices, reshuffles them every later epoch with its own seeded
//! generator, and gathers its batches from the shared dataset into one reused batch. Threads start
//! once per run, never wait on each other (an epoch ends per worker; its metrics are merged when
//! the last worker ends it), and allocate nothing per batch.
//!
//! The model's run metrics ([`Model::run_metrics`], e.g. word2vec's `effective_words`) are read
//! when the last worker ends an epoch, so each epoch reports what was gathered since the previous
//! epoch's report: the whole epoch, plus the first batches of the next one that faster workers
//! have already trained. The run reports their sum.

use std::sync::Mutex;
use std::time::Instant;

use super::{
    check_threads, fetch_positions, in_threads, metric_values, push_auc, push_values, step,
    summarize, Context, EpochHook, EpochReport, RunOptions, RunReport,
};
use crate::feed::{DataFeedDesc, FeedStats, InMemoryDataset};
use crate::metrics::Auc;
use crate::model::Model;
use crate::rng::{shuffle, SplitMix64};
use crate::{Error, Result};

/// Worker `w`'s share of `n` instances: the `w`-th of `threads` contiguous ranges of the order.
fn share(n: usize, threads: usize, w: usize) -> std::ops::Range<usize> {
    w * n / threads..(w + 1) * n / threads
}

/// One epoch's metrics, merged from the workers as each ends it.
struct EpochTotals {
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
    auc: Auc,
    finished: usize,
}

/// Every epoch's metrics, and the model's run metrics summed over the epochs reported so far.
struct Totals {
    per_epoch: Vec<EpochTotals>,
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

/// Trains `model` on `data` (laid out by `desc`) for `options.feed.epochs` epochs in `threads`
/// worker threads. `options.feed.in_memory` seeds the shuffles (`None`: file order, no shuffle);
/// `options.feed.batch_size` overrides the desc's. The same seed and thread count give the same
/// batches. `on_epoch` is called once per finished epoch (see [`EpochHook`]); the report lists
/// every epoch's metrics.
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
    let mut workers = model.workers(desc, threads)?;
    let epochs = options.feed.epochs.max(1);
    let seed = options.feed.in_memory;
    let batch_size = options.feed.batch_size(desc);
    model.run_metrics();
    let start = Instant::now();
    let mut order: Vec<u32> = (0..n32).collect();
    if let Some(seed) = seed {
        shuffle(&mut order, &mut SplitMix64(seed));
    }
    let totals = Mutex::new(Totals {
        per_epoch: (0..epochs)
            .map(|_| EpochTotals {
                sums: vec![0.0; names.len()],
                batches: 0,
                instances: 0,
                auc: Auc::default(),
                finished: 0,
            })
            .collect(),
        run: Vec::new(),
    });
    let reports: Mutex<Vec<EpochReport>> = Mutex::new(Vec::with_capacity(epochs));
    let nothing = || {};
    let ctx = Context::new(names, true, threads, options, &nothing);
    let states = in_threads(model, &mut workers, &ctx, |thread, worker, t| {
        let mut mine = order[share(n, threads, thread)].to_vec();
        let mut rng =
            SplitMix64(seed.unwrap_or(0) ^ (thread as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
        let mut batch = data.empty_batch();
        let mut epoch_sums = vec![0.0; names.len()];
        for epoch in 0..epochs {
            if seed.is_some() && epoch > 0 {
                shuffle(&mut mine, &mut rng);
            }
            let (batches_before, instances_before) = (t.batches, t.instances);
            epoch_sums.copy_from_slice(&t.sums);
            for chunk in mine.chunks(batch_size) {
                if ctx.stopped() {
                    return Ok(());
                }
                let t0 = Instant::now();
                batch.clear();
                data.gather(&mut batch, chunk);
                let gathered = t0.elapsed();
                t.wait += gathered;
                t.stages.read += gathered;
                step(model, worker, &ctx, t, &batch, None)?;
            }
            t.drain_auc(model, worker);
            let report = {
                let mut guard = totals.lock().unwrap_or_else(|p| p.into_inner());
                let all = &mut *guard;
                let e = &mut all.per_epoch[epoch];
                for ((s, now), before) in e.sums.iter_mut().zip(&t.sums).zip(&epoch_sums) {
                    *s += now - before;
                }
                e.batches += t.batches - batches_before;
                e.instances += t.instances - instances_before;
                e.auc.merge(std::mem::take(&mut t.auc));
                e.finished += 1;
                (e.finished == threads).then(|| {
                    let mut fetched = metric_values(
                        names,
                        &(0..names.len()).collect::<Vec<_>>(),
                        &e.sums,
                        e.batches,
                    );
                    let mut pairs = std::mem::take(&mut e.auc);
                    push_auc(&mut fetched, &mut pairs);
                    let values = model.run_metrics();
                    push_values(&mut fetched, &values);
                    add_values(&mut all.run, &values);
                    EpochReport {
                        epoch: epoch + 1,
                        fetched,
                        instances: e.instances,
                        elapsed: start.elapsed(),
                    }
                })
            };
            if let Some(report) = report {
                if let Some(hook) = on_epoch {
                    hook(&report)?;
                }
                reports
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(report);
            }
        }
        Ok(())
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
