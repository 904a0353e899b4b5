//! Periodic progress lines: step, elapsed time, instances/s and the metrics averaged since the
//! previous line, on an `indicatif` spinner when stderr is a terminal and as plain lines otherwise.
//!
//! The executor prints through a [`Reporter`], and so can any other runner of batches in threads
//! (the TensorFlow graph runner does): each thread gathers its batches' values in its own
//! [`LocalWindow`] and hands them to the shared reporter every
//! [`flush_every`](Reporter::flush_every) batches, so the reporter's lock is taken a few times per
//! printed line, not once per batch. The step count is one shared atomic counter, so the thread
//! whose batch is the period's prints that line: lines come at steps `period`, `2 * period`, ...
//! exactly at any thread count, each with the metrics of the batches handed over since the
//! previous line.
//!
//! ```
//! use std::time::Instant;
//! use hogwild::executor::{LocalWindow, Progress, Reporter};
//!
//! // Metric names may be borrowed or owned (here read from a model at run time).
//! let names = vec!["loss".to_string(), "accuracy".to_string()];
//! let reporter = Reporter::new(&names, 100, Progress::Lines, Instant::now());
//! let mut local = LocalWindow::new(names.len());
//! for _ in 0..250 {
//!     local.add(&[0.69, 0.5], 32);
//!     // Prints `step      100  elapsed     0.00s  ... instances/s  loss 0.69000  accuracy
//!     // 0.50000`, then step 200.
//!     reporter.batch_done(&mut local, reporter.flush_every(1));
//! }
//! reporter.record(&mut local);
//! reporter.finish();
//! ```

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::RunReport;

/// Where progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Progress {
    /// A spinner when stderr is a terminal, plain lines otherwise.
    #[default]
    Auto,
    /// Plain lines on stderr.
    Lines,
    /// Nothing.
    Quiet,
}

#[derive(Debug)]
struct Window {
    batches: u64,
    instances: u64,
    sums: Vec<f64>,
    window_batches: u64,
    window_instances: u64,
    window_start: Instant,
}

/// One worker's batches not yet handed to the shared [`Reporter`]: the sums of their metric
/// values weighted by their instances, and their batch and instance counts.
#[derive(Debug, Clone, Default)]
pub struct LocalWindow {
    sums: Vec<f64>,
    batches: u64,
    instances: u64,
}

impl LocalWindow {
    /// An empty window for `metrics` values per batch.
    pub fn new(metrics: usize) -> Self {
        Self {
            sums: vec![0.0; metrics],
            batches: 0,
            instances: 0,
        }
    }

    /// Batches added since the window was last recorded.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// Adds one batch of `instances` instances, with its metric `values` (in the reporter's
    /// order).
    pub fn add(&mut self, values: &[f64], instances: usize) {
        for (s, v) in self.sums.iter_mut().zip(values) {
            *s += v * instances as f64;
        }
        self.batches += 1;
        self.instances += instances as u64;
    }

    fn clear(&mut self) {
        self.sums.iter_mut().for_each(|s| *s = 0.0);
        self.batches = 0;
        self.instances = 0;
    }
}

/// Prints a progress line every `period` batches of all threads together (see the module docs):
/// `step <batches>  elapsed <s>  <rate> instances/s` and each metric's mean over the batches since
/// the previous line. Shared by reference between the threads.
#[derive(Debug)]
pub struct Reporter {
    names: Vec<String>,
    period: u64,
    start: Instant,
    bar: Option<ProgressBar>,
    quiet: bool,
    /// Batches finished by all threads, counted one by one ([`Reporter::batch_done`]).
    steps: AtomicU64,
    window: Mutex<Window>,
    /// The steps of the lines printed, for the tests.
    #[cfg(test)]
    printed: Mutex<Vec<u64>>,
}

impl Reporter {
    /// A reporter of the metrics `names` (the order of the values a [`LocalWindow`] adds) that
    /// prints every `period` batches (0: never) to `progress`, timing from `start`.
    pub fn new<S: AsRef<str>>(
        names: &[S],
        period: usize,
        progress: Progress,
        start: Instant,
    ) -> Self {
        let bar = (progress == Progress::Auto && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
                bar.set_style(style);
            }
            bar
        });
        Self {
            names: names.iter().map(|n| n.as_ref().to_owned()).collect(),
            period: period as u64,
            start,
            bar,
            quiet: progress == Progress::Quiet,
            steps: AtomicU64::new(0),
            #[cfg(test)]
            printed: Mutex::new(Vec::new()),
            window: Mutex::new(Window {
                batches: 0,
                instances: 0,
                sums: vec![0.0; names.len()],
                window_batches: 0,
                window_instances: 0,
                window_start: start,
            }),
        }
    }

    /// Whether nothing will be printed (callers may then skip gathering windows).
    pub fn is_quiet(&self) -> bool {
        self.quiet || self.period == 0
    }

    /// Batches a worker gathers locally before handing them to [`Reporter::record`]: the shared
    /// window is locked a few times per printed line, not once per batch.
    pub fn flush_every(&self, threads: usize) -> u64 {
        (self.period / (4 * threads.max(1) as u64)).clamp(1, 64)
    }

    /// Counts the batch just added to `local`: when it is the period's batch (step `period`,
    /// `2 * period`, ... of all threads), records `local` and prints the line of that step; else
    /// records `local` once it holds `flush_every` batches.
    pub fn batch_done(&self, local: &mut LocalWindow, flush_every: u64) {
        if self.is_quiet() {
            local.clear();
            return;
        }
        let step = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        if step.is_multiple_of(self.period) {
            self.record_at(local, Some(step));
        } else if local.batches >= flush_every {
            self.record_at(local, None);
        }
    }

    /// Records `local`'s batches (metric sums, batch and instance counts) and empties it, without
    /// printing; call it with what is left when a thread ends.
    pub fn record(&self, local: &mut LocalWindow) {
        self.record_at(local, None);
    }

    /// Records `local`, then prints the line of `step` when given.
    fn record_at(&self, local: &mut LocalWindow, step: Option<u64>) {
        if self.is_quiet() || (local.batches == 0 && step.is_none()) {
            local.clear();
            return;
        }
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        w.batches += local.batches;
        w.instances += local.instances;
        w.window_batches += local.batches;
        w.window_instances += local.instances;
        for (s, v) in w.sums.iter_mut().zip(&local.sums) {
            *s += v;
        }
        local.clear();
        if let Some(bar) = &self.bar {
            bar.set_message(format!("step {} {} instances", w.batches, w.instances));
        }
        let Some(step) = step else {
            return;
        };
        let now = Instant::now();
        let rate =
            w.window_instances as f64 / now.duration_since(w.window_start).as_secs_f64().max(1e-9);
        let mut line = format!(
            "step {:>8}  elapsed {:>8.2}s  {:>10.0} instances/s",
            step,
            now.duration_since(self.start).as_secs_f64(),
            rate
        );
        let n = w.window_instances.max(1) as f64;
        for (name, s) in self.names.iter().zip(&w.sums) {
            line.push_str(&format!("  {name} {:.5}", s / n));
        }
        w.sums.iter_mut().for_each(|s| *s = 0.0);
        w.window_batches = 0;
        w.window_instances = 0;
        w.window_start = now;
        drop(w);
        #[cfg(test)]
        self.printed.lock().unwrap().push(step);
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Clears the spinner, if any; call it when every thread has ended.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Debug mode's summary: mean time per batch of each stage, and the share spent waiting for data.
pub(super) fn print_stages(report: &RunReport, threads: usize) {
    let Some(st) = report.stages else { return };
    let per_batch = |d: std::time::Duration| d.as_secs_f64() * 1e6 / report.batches.max(1) as f64;
    let total = st.total().as_secs_f64().max(1e-12);
    eprintln!(
        "stages per batch (us, {threads} threads): read {:.1}  forward {:.1}  backward {:.1}  \
         update {:.1}  | IO {:.1}%  | {:.0} instances/s",
        per_batch(st.read),
        per_batch(st.forward),
        per_batch(st.backward),
        per_batch(st.update),
        100.0 * st.read.as_secs_f64() / total,
        report.instances_per_sec()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_weigh_batches_by_instances_and_empty_when_recorded() {
        let reporter = Reporter::new(&["loss".to_string()], 4, Progress::Lines, Instant::now());
        let mut local = LocalWindow::new(1);
        local.add(&[0.5], 8);
        local.add(&[1.5], 2);
        assert_eq!(
            (local.batches(), local.instances, local.sums[0]),
            (2, 10, 0.5 * 8.0 + 1.5 * 2.0)
        );
        reporter.record(&mut local);
        assert_eq!(
            (local.batches(), local.instances, local.sums[0]),
            (0, 0, 0.0)
        );
        let w = reporter.window.lock().unwrap();
        assert_eq!((w.batches, w.instances, w.sums[0]), (2, 10, 7.0));
    }

    #[test]
    fn lines_come_every_period_steps_at_any_thread_count() {
        for threads in [1, 2, 3, 8] {
            let reporter = Reporter::new(&["loss"], 10, Progress::Lines, Instant::now());
            let flush = reporter.flush_every(threads);
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        let mut local = LocalWindow::new(1);
                        for _ in 0..37 {
                            local.add(&[1.0], 4);
                            reporter.batch_done(&mut local, flush);
                        }
                        reporter.record(&mut local);
                    });
                }
            });
            let mut printed = reporter.printed.lock().unwrap().clone();
            printed.sort();
            let want: Vec<u64> = (1..=37 * threads as u64 / 10).map(|k| 10 * k).collect();
            assert_eq!(printed, want, "{threads} threads");
            assert_eq!(reporter.window.lock().unwrap().batches, 37 * threads as u64);
        }
    }

    // flush_every = period / (4 threads), within [1, 64].
    #[test]
    fn workers_flush_a_few_times_per_line() {
        let names: [&str; 0] = [];
        let flush = |period, threads| {
            Reporter::new(&names, period, Progress::Quiet, Instant::now()).flush_every(threads)
        };
        assert_eq!(flush(100, 1), 25);
        assert_eq!(flush(100, 2), 12);
        assert_eq!(flush(10, 4), 1);
        assert_eq!(flush(100_000, 2), 64);
        assert!(Reporter::new(&names, 0, Progress::Lines, Instant::now()).is_quiet());
        assert!(Reporter::new(&names, 5, Progress::Quiet, Instant::now()).is_quiet());
    }
}
