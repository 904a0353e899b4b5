//! The worker threads: each takes batches from its own queue of the feed (and from the others' when
//! its own is empty) and runs steps on the shared session until the feed ends; fetched values are
//! averaged over all instances of all threads (each batch's value weighted by its instances), and
//! a progress line is printed every `print_period`
//! batches (all threads together).
//!
//! The layout follows the native executor's (`hogwild::executor`): same averaging and the same
//! progress lines, printed by its
//! [`Reporter`](hogwild::executor::Reporter) as plain lines on stderr.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hogwild::executor::{LocalWindow, Progress, Reporter};

use crate::inputs::SlotRef;
use crate::model::{TfModel, TfWorker};
use crate::{Error, Result};

/// A batch the runner can feed: its instance count and its used slots, in binding order.
pub trait BatchSlots {
    /// Instances in the batch.
    fn instances(&self) -> usize;
    /// The used slots, in the order the worker was bound with.
    fn slot_refs(&self) -> Vec<SlotRef<'_>>;
}

/// What a run returns.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Each fetched value averaged over every batch of every thread, in the model's order.
    pub fetched: Vec<(String, f64)>,
    pub batches: u64,
    pub instances: u64,
    pub elapsed: Duration,
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

#[derive(Default)]
struct Totals {
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
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

/// Runs one thread per queue, each with its worker, until every queue ends: training steps when
/// `train`, evaluation otherwise. The first failure stops the other threads after their current
/// batch, calls `on_failure` (e.g. to stop the data feed) and is returned, naming its thread.
pub fn run_threads<Q, B>(
    model: &TfModel,
    workers: Vec<TfWorker>,
    queues: Vec<Q>,
    train: bool,
    print_period: usize,
    on_failure: &(dyn Fn() + Sync),
) -> Result<RunReport>
where
    Q: FnMut() -> Option<B> + Send,
    B: BatchSlots,
{
    if workers.len() != queues.len() || workers.is_empty() {
        return Err(Error::InvalidOption {
            name: "threads",
            reason: format!(
                "{} workers for {} queues; need one worker per queue and at least one",
                workers.len(),
                queues.len()
            ),
        });
    }
    let names = model.metrics();
    let start = Instant::now();
    let reporter = Reporter::new(names, print_period, Progress::Lines, start);
    let flush_every = reporter.flush_every(workers.len());
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let totals: Vec<Totals> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .zip(queues)
            .enumerate()
            .map(|(thread, (mut worker, mut queue))| {
                let (reporter, stop, failure) = (&reporter, &stop, &failure);
                s.spawn(move || {
                    let mut totals = Totals {
                        sums: vec![0.0; names.len()],
                        ..Default::default()
                    };
                    let mut local = LocalWindow::new(names.len());
                    let body = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
                        let mut out = vec![0.0; names.len()];
                        while !stop.load(Ordering::Relaxed) {
                            let Some(batch) = queue() else { break };
                            let n = batch.instances();
                            let slots = batch.slot_refs();
                            if train {
                                model.train_batch(&mut worker, &slots, n, &mut out)?;
                            } else {
                                model.eval_batch(&mut worker, &slots, n, &mut out)?;
                            }
                            for (s, v) in totals.sums.iter_mut().zip(&out) {
                                *s += v * n as f64;
                            }
                            totals.batches += 1;
                            totals.instances += n as u64;
                            if !reporter.is_quiet() {
                                local.add(&out, n);
                                if local.batches() >= flush_every {
                                    reporter.record(&mut local);
                                }
                            }
                        }
                        Ok(())
                    }));
                    reporter.record(&mut local);
                    let error = match body {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(e),
                        Err(p) => Some(Error::InvalidOption {
                            name: "worker",
                            reason: panic_message(p.as_ref()),
                        }),
                    };
                    if let Some(e) = error {
                        stop.store(true, Ordering::Relaxed);
                        on_failure();
                        let mut f = failure.lock().unwrap_or_else(|p| p.into_inner());
                        f.get_or_insert(Error::Thread {
                            thread,
                            source: Box::new(e),
                        });
                    }
                    totals
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    reporter.finish();
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut sums = vec![0.0; names.len()];
    let (mut batches, mut instances) = (0, 0);
    for t in &totals {
        for (a, b) in sums.iter_mut().zip(&t.sums) {
            *a += b;
        }
        batches += t.batches;
        instances += t.instances;
    }
    let denom = instances.max(1) as f64;
    Ok(RunReport {
        fetched: names
            .iter()
            .zip(sums)
            .map(|(n, s)| (n.clone(), s / denom))
            .collect(),
        batches,
        instances,
        elapsed: start.elapsed(),
    })
}
