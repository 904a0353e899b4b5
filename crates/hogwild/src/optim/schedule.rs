//! Learning-rate schedules that follow a training run's progress, shared by every worker thread.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// A learning rate that falls linearly from the optimizer's to a floor over a run of `total`
/// units of work (instances, words), fastText's and word2vec's schedule. Workers add the work they
/// take as they take it, so the rate follows the whole run's progress whatever the thread count,
/// and a run that ends early in one thread does not leave the others at a high rate.
///
/// ```
/// use hogwild::optim::LinearDecay;
///
/// let decay = LinearDecay::default();
/// assert_eq!(decay.scale(1_000), 1.0); // no run started: no decay
/// decay.start(100);
/// assert_eq!(decay.fraction(decay.advance(25)), 0.0); // the first 25 units start at the top
/// assert_eq!(decay.fraction(decay.advance(25)), 0.25);
/// assert_eq!(decay.scale(50), 0.5);
/// assert_eq!(decay.scale(100), 0.0);
/// // Held for the first half, then down to zero over the second.
/// assert_eq!(decay.scale_after(40, 0.5), 1.0);
/// assert_eq!(decay.scale_after(75, 0.5), 0.5);
/// assert_eq!(decay.scale_after(100, 0.5), 0.0);
/// ```
#[derive(Debug, Default)]
pub struct LinearDecay {
    /// Units of work taken so far in this run. Every worker adds to it as it takes work and reads
    /// `total` as often, so it has a cache line (pair) of its own: its writes then do not evict
    /// `total`, or whatever the struct sits next to, from the other workers' caches.
    done: CachePadded<AtomicU64>,
    /// Units the run holds.
    total: AtomicU64,
}

impl LinearDecay {
    /// Starts a run of `total` units: progress back to zero.
    pub fn start(&self, total: u64) {
        // Relaxed: a run starts before its worker threads are spawned, which orders it.
        self.total.store(total, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
    }

    /// Takes `units` of work; returns the units taken before them (where they start).
    #[inline]
    pub fn advance(&self, units: u64) -> u64 {
        // Relaxed: the count is the only thing shared through it.
        self.done.fetch_add(units, Ordering::Relaxed)
    }

    /// Units of work taken so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Sets the units taken so far (a run resumed from a checkpoint).
    pub fn set_done(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
    }

    /// The run's units of work.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// How far into the run work starting at `done` is: in `[0, 1]`, 1 once the run is done; 0
    /// when no run has been started (the rate stays the optimizer's).
    #[inline]
    pub fn fraction(&self, done: u64) -> f64 {
        let total = self.total();
        if total == 0 {
            return 0.0;
        }
        (done as f64 / total as f64).min(1.0)
    }

    /// The factor on the learning rate for work starting at `done`: `1 - fraction`, from 1 at
    /// the start to 0 at the end.
    #[inline]
    pub fn scale(&self, done: u64) -> f32 {
        self.scale_after(done, 0.0)
    }

    /// The factor on the learning rate for work starting at `done` when the rate is held for
    /// the first `hold` of the run (in `[0, 1)`) and then falls linearly to 0 at the end.
    #[inline]
    pub fn scale_after(&self, done: u64, hold: f64) -> f32 {
        let f = self.fraction(done);
        if f <= hold {
            return 1.0;
        }
        ((1.0 - f) / (1.0 - hold)) as f32
    }
}
