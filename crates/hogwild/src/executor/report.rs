//! Periodic progress lines: step, elapsed time, instances/s and the metrics averaged since the
//! previous line, on an `indicatif` spinner when stderr is a terminal and as plain lines otherwise.

use std::io::IsTerminal;
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

struct Window {
    batches: u64,
    instances: u64,
    sums: Vec<f64>,
    window_batches: u64,
    window_instances: u64,
    window_start: Instant,
}

/// One worker's batches not yet handed to the shared [`Reporter`].
pub(super) struct LocalWindow {
    pub(super) sums: Vec<f64>,
    pub(super) batches: u64,
    pub(super) instances: u64,
}

impl LocalWindow {
    pub(super) fn new(metrics: usize) -> Self {
        Self {
            sums: vec![0.0; metrics],
            batches: 0,
            instances: 0,
        }
    }

    /// Adds one batch.
    pub(super) fn add(&mut self, values: &[f64], instances: usize) {
        for (s, v) in self.sums.iter_mut().zip(values) {
            *s += v;
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

pub(super) struct Reporter {
    names: &'static [&'static str],
    period: u64,
    start: Instant,
    bar: Option<ProgressBar>,
    quiet: bool,
    window: Mutex<Window>,
}

impl Reporter {
    pub(super) fn new(
        names: &'static [&'static str],
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
            names,
            period: period as u64,
            start,
            bar,
            quiet: progress == Progress::Quiet,
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

    /// Whether nothing will be printed.
    pub(super) fn is_quiet(&self) -> bool {
        self.quiet || self.period == 0
    }

    /// Batches a worker gathers locally before handing them to [`Reporter::record`]: the shared
    /// window is locked a few times per printed line, not once per batch.
    pub(super) fn flush_every(&self, threads: usize) -> u64 {
        (self.period / (4 * threads.max(1) as u64)).clamp(1, 64)
    }

    /// Records `local`'s batches (metric sums, batch and instance counts) and empties it; prints
    /// when the step passes a multiple of the period.
    pub(super) fn record(&self, local: &mut LocalWindow) {
        if self.is_quiet() || local.batches == 0 {
            local.clear();
            return;
        }
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let before = w.batches / self.period;
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
        if w.batches / self.period == before {
            return;
        }
        let now = Instant::now();
        let rate =
            w.window_instances as f64 / now.duration_since(w.window_start).as_secs_f64().max(1e-9);
        let mut line = format!(
            "step {:>8}  elapsed {:>8.2}s  {:>10.0} instances/s",
            w.batches,
            now.duration_since(self.start).as_secs_f64(),
            rate
        );
        let n = w.window_batches as f64;
        for (name, s) in self.names.iter().zip(&w.sums) {
            line.push_str(&format!("  {name} {:.5}", s / n));
        }
        w.sums.iter_mut().for_each(|s| *s = 0.0);
        w.window_batches = 0;
        w.window_instances = 0;
        w.window_start = now;
        drop(w);
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub(super) fn finish(&self) {
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
