//! `hogwild train --budget SECONDS --validation FILES`: searches a model's learning rate, width,
//! epochs and (bag-of-words) bigrams for the best score on held-out files within a time budget,
//! as fastText's `-autotune-validation` and `-autotune-duration` do, and keeps the best model.
//!
//! The search is fastText's: the first trial trains the configuration as given; each later one
//! starts from the best trial so far and moves every searched setting by a normal step, on a
//! log scale for the rate, the width and the epochs (of base 2: a step of 1 doubles or halves),
//! the spread narrowing over the budget from fastText's starting to its ending widths. The
//! score is the validation accuracy for the classifier (fastText's default `f1`: the same for
//! one label per line and one predicted) and the validation AUC for the CTR models.
//!
//! Unlike fastText, which trains the best settings again once the time is up, the best model is
//! kept: saved (atomically) to `--save` each time a trial beats it, so that the file always holds
//! the best model so far, also when the run is stopped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use hogwild::executor::{self, Progress, Run, RunOptions, Stop};
use hogwild::feed::{DataFeedDesc, InMemoryDataset};
use hogwild::models::{ModelConfig, ModelKind};
use hogwild::rng::SplitMix64;
use hogwild::store::available_memory;

use crate::models::AnyModel;
use crate::{interrupt, with_model};

/// A setting the search may change (`--tune`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Knob {
    /// The optimizer's learning rate.
    Lr,
    /// The embedding width (bag-of-words) or the factor size (factorization machines).
    Dim,
    /// The passes over the training files.
    Epochs,
    /// Hashed word bigrams on or off (bag-of-words).
    Bigrams,
}

/// One trial's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Trial {
    lr: f32,
    dim: usize,
    epochs: usize,
    bigrams: bool,
}

/// How one setting moves: the range it is clipped to, whether a step multiplies it by a power
/// of 2 (`log`) or adds to it, and fastText's step spreads at the start and the end of the
/// budget.
struct Walk {
    min: f64,
    max: f64,
    log: bool,
    start_sigma: f64,
    end_sigma: f64,
}

impl Walk {
    /// `value` moved by one normal step whose spread narrows with the share `t` of the budget
    /// spent: fastText's, constant over the first quarter, shrinking linearly to its end width at
    /// three quarters.
    fn step(&self, value: f64, t: f64, rng: &mut SplitMix64) -> f64 {
        let sigma = self.start_sigma
            - (self.start_sigma - self.end_sigma) / 0.5 * (t - 0.25).clamp(0.0, 0.5);
        let step = sigma * normal(rng);
        let moved = if self.log {
            value * step.exp2()
        } else {
            value + step
        };
        moved.clamp(self.min, self.max)
    }
}

/// fastText's epoch steps: 1 to 100 epochs.
const EPOCHS: Walk = Walk {
    min: 1.0,
    max: 100.0,
    log: true,
    start_sigma: 2.8,
    end_sigma: 2.5,
};
/// fastText's width steps: 1 to 1000.
const DIM: Walk = Walk {
    min: 1.0,
    max: 1000.0,
    log: true,
    start_sigma: 1.4,
    end_sigma: 0.3,
};
/// fastText's word n-gram steps, over 1 (bigrams off) and 2 (on).
const NGRAMS: Walk = Walk {
    min: 1.0,
    max: 2.0,
    log: false,
    start_sigma: 4.3,
    end_sigma: 2.4,
};
/// fastText searches its rate in 0.01 to 5, 1/10 to 50 times its default 0.1: the range here is
/// the same multiples of the configured rate, for any optimizer.
const LR_BELOW: f64 = 10.0;
const LR_ABOVE: f64 = 50.0;
/// fastText's rate steps.
const LR_START_SIGMA: f64 = 1.9;
const LR_END_SIGMA: f64 = 1.0;

/// A standard normal sample (Box-Muller).
fn normal(rng: &mut SplitMix64) -> f64 {
    // 53 random bits in (0, 1]: the logarithm is finite.
    let u1 = ((rng.next() >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let u2 = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// What the search works with: the configuration as given, the loaded training data and the
/// validation files, and how the runs are made.
pub struct Search<'a> {
    pub config: &'a ModelConfig,
    pub desc: &'a DataFeedDesc,
    pub data: &'a InMemoryDataset,
    pub validation: &'a [PathBuf],
    /// The validation score the search maximises (`accuracy`, `auc`).
    pub metric: &'static str,
    /// The `--labels` names, set on every trial's model.
    pub names: Option<Vec<String>>,
    /// The labels' counts a new bag-of-words model with `loss = "hs"` or `"ns"` needs.
    pub counts: Option<Vec<u64>>,
    pub epochs: usize,
    pub threads: usize,
    pub budget: Duration,
    pub tune: Vec<Knob>,
    pub save: Option<PathBuf>,
    pub seed: u64,
    pub verbose: bool,
    /// The training runs' options (feed mode, shuffle, bad lines); progress is turned off.
    pub options: RunOptions,
}

/// The settings `--tune` may name for a model.
fn searchable(config: &ModelConfig) -> Result<&'static [Knob]> {
    match &config.model {
        ModelKind::Bow(_) => Ok(&[Knob::Lr, Knob::Dim, Knob::Epochs, Knob::Bigrams]),
        ModelKind::Fm(c) if c.field_dims.is_empty() => Ok(&[Knob::Lr, Knob::Dim, Knob::Epochs]),
        ModelKind::Ffm(_) => Ok(&[Knob::Lr, Knob::Dim, Knob::Epochs]),
        ModelKind::Fm(_) | ModelKind::Lr(_) => Ok(&[Knob::Lr, Knob::Epochs]),
        ModelKind::Word2vec(_) => bail!(
            "--budget searches settings for the best score on --validation files: word2vec has \
             no validation score (judge its vectors with `hogwild analogy --questions`)"
        ),
    }
}

/// Checks `--tune` against the model before any data is read: the knobs it names must be
/// searchable for this kind of model. Returns the knobs to search (all that apply when none
/// are named).
pub fn check(config: &ModelConfig, tune: &[Knob]) -> Result<Vec<Knob>> {
    let allowed = searchable(config)?;
    if tune.is_empty() {
        return Ok(allowed.to_vec());
    }
    if let Some(k) = tune.iter().find(|k| !allowed.contains(k)) {
        let names: Vec<_> = allowed.iter().map(|k| knob_name(*k)).collect();
        bail!(
            "--tune {}: not a setting of this model (it has {})",
            knob_name(*k),
            names.join(", ")
        );
    }
    Ok(tune.to_vec())
}

fn knob_name(k: Knob) -> &'static str {
    match k {
        Knob::Lr => "lr",
        Knob::Dim => "dim",
        Knob::Epochs => "epochs",
        Knob::Bigrams => "bigrams",
    }
}

/// The bigram buckets a trial with bigrams on uses: the configured ones, or fastText's default
/// 2,000,000 when the configuration has none.
const DEFAULT_BIGRAM_BUCKETS: usize = 2_000_000;

impl Search<'_> {
    /// The trial the configuration as given makes.
    fn given(&self) -> Trial {
        let (dim, bigrams) = match &self.config.model {
            ModelKind::Bow(b) => (b.dim, b.bigram_buckets > 0),
            ModelKind::Fm(c) | ModelKind::Lr(c) | ModelKind::Ffm(c) => (c.dim.unwrap_or(0), false),
            ModelKind::Word2vec(w) => (w.dim, false),
        };
        Trial {
            lr: self.config.optimizer.lr(),
            dim,
            epochs: self.epochs,
            bigrams,
        }
    }

    /// The configuration of `trial`.
    fn config_of(&self, trial: &Trial) -> ModelConfig {
        let mut config = self.config.clone();
        config.optimizer = config.optimizer.with_lr(trial.lr);
        match &mut config.model {
            ModelKind::Bow(b) => {
                b.dim = trial.dim;
                b.bigram_buckets = match (trial.bigrams, b.bigram_buckets) {
                    (false, _) => 0,
                    (true, 0) => DEFAULT_BIGRAM_BUCKETS,
                    (true, n) => n,
                };
            }
            ModelKind::Fm(c) | ModelKind::Ffm(c) if self.tune.contains(&Knob::Dim) => {
                c.dim = Some(trial.dim)
            }
            _ => {}
        }
        config
    }

    /// The next trial after `best`, `t` of the budget spent.
    fn ask(&self, best: &Trial, t: f64, rng: &mut SplitMix64) -> Trial {
        let mut next = *best;
        let lr0 = f64::from(self.config.optimizer.lr());
        for knob in &self.tune {
            match knob {
                Knob::Lr => {
                    let walk = Walk {
                        min: lr0 / LR_BELOW,
                        max: lr0 * LR_ABOVE,
                        log: true,
                        start_sigma: LR_START_SIGMA,
                        end_sigma: LR_END_SIGMA,
                    };
                    next.lr = walk.step(f64::from(best.lr), t, rng) as f32;
                }
                Knob::Dim => next.dim = DIM.step(best.dim as f64, t, rng) as usize,
                Knob::Epochs => next.epochs = EPOCHS.step(best.epochs as f64, t, rng) as usize,
                Knob::Bigrams => {
                    let n = if best.bigrams { 2.0 } else { 1.0 };
                    next.bigrams = NGRAMS.step(n, t, rng) as usize >= 2;
                }
            }
        }
        next
    }

    fn describe(&self, trial: &Trial) -> String {
        let mut parts = Vec::new();
        for knob in &self.tune {
            parts.push(match knob {
                Knob::Lr => format!("lr {:.4}", trial.lr),
                Knob::Dim => format!("dim {}", trial.dim),
                Knob::Epochs => format!("epochs {}", trial.epochs),
                Knob::Bigrams => format!("bigrams {}", if trial.bigrams { "on" } else { "off" }),
            });
        }
        parts.join(" ")
    }

    /// Runs the search; returns the best model, saved to `--save` when given.
    pub fn run(self) -> Result<AnyModel> {
        let metric = self.metric;
        let user_stop = interrupt::install()?;
        let memory_cap = available_memory().map(|m| m * 2 / 5);
        let mut rng = SplitMix64(self.seed ^ 0x6175_746f_7475_6e65);
        let started = Instant::now();
        let deadline = started + self.budget;
        let mut best: Option<(usize, Trial, f64, AnyModel)> = None;
        let (mut trials, mut diverged) = (0usize, 0usize);
        let given = self.given();
        loop {
            let now = Instant::now();
            if now >= deadline || user_stop.requested() {
                break;
            }
            trials += 1;
            let t = (now - started).as_secs_f64() / self.budget.as_secs_f64();
            let mut trial = match &best {
                None if trials == 1 => given,
                None => self.ask(&given, t, &mut rng),
                Some((_, b, _, _)) => self.ask(b, t, &mut rng),
            };
            let model = self.build(&mut trial, trials == 1, memory_cap)?;
            let trial_started = Instant::now();
            let outcome = until(deadline, &user_stop, |stop| {
                self.score(&model, &trial, metric, stop)
            })?;
            let took = trial_started.elapsed().as_secs_f64();
            let left = deadline
                .saturating_duration_since(Instant::now())
                .as_secs_f64();
            let line = format!("trial {trials}: {}", self.describe(&trial));
            let score = match outcome {
                Outcome::Stopped => {
                    if self.verbose {
                        let by = if user_stop.requested() {
                            "a stop request"
                        } else {
                            "the budget"
                        };
                        println!("{line}: stopped by {by} after {took:.1}s (not counted)");
                    }
                    trials -= 1;
                    break;
                }
                Outcome::Diverged(loss) => {
                    diverged += 1;
                    if self.verbose {
                        println!("{line}: diverged (training loss {loss}), {took:.1}s");
                    }
                    continue;
                }
                Outcome::Unscored(reason) if best.is_none() => {
                    bail!("--validation: the model reports no validation {metric}: {reason}")
                }
                Outcome::Unscored(reason) => {
                    if self.verbose {
                        println!("{line}: no validation {metric} ({reason}), {took:.1}s");
                    }
                    continue;
                }
                Outcome::Score(score) => score,
            };
            let improved = best.as_ref().is_none_or(|(_, _, s, _)| score > *s);
            if let (true, Some(path)) = (improved, &self.save) {
                let stale = model.save(path, trial.epochs)?;
                if !stale.is_empty() {
                    println!("{stale}");
                }
            }
            if self.verbose {
                let (best_trial, best_score) = match (&best, improved) {
                    (Some((n, _, s, _)), false) => (*n, *s),
                    _ => (trials, score),
                };
                println!(
                    "{line}: validation {metric} {score:.5}, {took:.1}s (best {best_score:.5}, \
                     trial {best_trial}; {left:.1}s left)"
                );
            }
            if improved {
                best = Some((trials, trial, score, model));
            }
        }
        let Some((n, trial, score, model)) = best else {
            if user_stop.requested() {
                bail!(
                    "search stopped by {} before a trial finished: nothing saved",
                    interrupt::received().unwrap_or("a stop request")
                );
            }
            bail!(
                "--budget {}: no trial finished in time{} (the first trains the configuration \
                 as given, for {} epochs): give a larger budget",
                self.budget.as_secs_f64(),
                if diverged > 0 {
                    " without diverging"
                } else {
                    ""
                },
                self.epochs
            );
        };
        println!(
            "autotune: best of {trials} trial{} in {:.1}s{}: trial {n}, validation {metric} \
             {score:.5} with {}",
            if trials == 1 { "" } else { "s" },
            started.elapsed().as_secs_f64(),
            if diverged > 0 {
                format!(" ({diverged} diverged)")
            } else {
                String::new()
            },
            self.settings(&trial)
        );
        if let Some(path) = &self.save {
            println!(
                "saved {} (trial {n}, {} epochs)",
                path.display(),
                trial.epochs
            );
        }
        if user_stop.requested() {
            bail!(
                "search stopped by {}",
                interrupt::received().unwrap_or("a stop request")
            );
        }
        Ok(model)
    }

    /// The best trial's settings as the configuration file and `--epochs` write them.
    fn settings(&self, trial: &Trial) -> String {
        let config = self.config_of(trial);
        let mut parts = vec![format!("lr = {}", trial.lr)];
        match &config.model {
            ModelKind::Bow(b) => {
                parts.push(format!("dim = {}", b.dim));
                parts.push(format!("bigram_buckets = {}", b.bigram_buckets));
            }
            ModelKind::Fm(c) | ModelKind::Ffm(c) => {
                if let Some(d) = c.dim {
                    parts.push(format!("dim = {d}"));
                }
            }
            _ => {}
        }
        parts.push(format!("--epochs {}", trial.epochs));
        parts.join(", ")
    }

    /// A fresh, initialised model of `trial`. A sampled trial whose model would take more than
    /// `cap` bytes has its width halved until it fits (the configuration as given is trained as
    /// it is, as plain training would).
    fn build(&self, trial: &mut Trial, given: bool, cap: Option<usize>) -> Result<AnyModel> {
        loop {
            // A new model's tables are zero pages not yet touched: an oversized one costs no
            // memory until its startup step writes it.
            let model = AnyModel::new(&self.config_of(trial), None)
                .with_context(|| format!("a model with {}", self.describe(trial)))?;
            let mut model = model;
            let fits = cap.is_none_or(|cap| model.memory_bytes() <= cap);
            if given || fits || trial.dim <= 1 || !self.tune.contains(&Knob::Dim) {
                with_model!(&model, m => executor::startup(m));
                if let (Some(names), Some(labels)) = (&self.names, model.labels_mut()) {
                    labels.set_names(names.clone())?;
                }
                if let Some(counts) = &self.counts {
                    model.set_label_counts(counts.clone())?;
                }
                return Ok(model);
            }
            trial.dim /= 2;
        }
    }

    /// Trains `model` for `trial.epochs` and scores it on the validation files.
    fn score(&self, model: &AnyModel, trial: &Trial, metric: &str, stop: Stop) -> Result<Outcome> {
        let mut options = self.options.clone();
        options.progress = Progress::Quiet;
        options.feed.epochs = trial.epochs;
        options.stop = stop;
        let report = with_model!(model, m =>
            Run::new(m, self.desc).threads(self.threads).options(&options).train_dataset(self.data))
        .context("training a trial")?;
        if report.stopped {
            return Ok(Outcome::Stopped);
        }
        let loss = report
            .epochs
            .last()
            .and_then(|e| e.get("loss"))
            .unwrap_or(f64::NAN);
        if !loss.is_finite() {
            return Ok(Outcome::Diverged(loss));
        }
        let report = match with_model!(model, m => Run::new(m, self.desc).threads(self.threads).options(&options).eval(self.validation))
        {
            // An evaluation cut short is an error (its metrics would be of part of the data).
            Err(_) if options.stop.requested() => return Ok(Outcome::Stopped),
            report => report.context("evaluating a trial on the --validation files")?,
        };
        Ok(match report.get(metric) {
            Some(score) if score.is_finite() => Outcome::Score(score),
            Some(score) => Outcome::Diverged(score),
            None => Outcome::Unscored(
                report
                    .unavailable
                    .iter()
                    .find(|(name, _)| name == metric)
                    .map_or_else(|| "not reported".into(), |(_, why)| why.clone()),
            ),
        })
    }
}

/// How a trial ended.
enum Outcome {
    Score(f64),
    /// The training loss (or the score) is not a number.
    Diverged(f64),
    /// The validation files give no score (AUC of one class).
    Unscored(String),
    /// The budget ran out, or the user asked to stop.
    Stopped,
}

/// Runs `f` with a stop request that is made when `deadline` passes or `user` asks to stop.
fn until<T>(deadline: Instant, user: &Stop, f: impl FnOnce(Stop) -> T) -> T {
    let stop = Stop::from_flag(Arc::new(AtomicBool::new(false)));
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if user.requested() || Instant::now() >= deadline {
                    stop.request();
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let out = f(stop.clone());
        done.store(true, Ordering::Relaxed);
        out
    })
}

/// `--budget`: a number of seconds, more than 0.
pub fn parse_budget(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        Ok(s) => Err(format!("{s} is not a time budget in seconds (more than 0)")),
        Err(e) => Err(format!("\"{text}\" is not a number: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_narrow_over_the_budget_and_stay_in_range() {
        // fastText's spread: the start width until a quarter of the budget, the end width from
        // three quarters, linear between.
        let spread = |walk: &Walk, t: f64| {
            let mut rng = SplitMix64(7);
            let xs: Vec<f64> = (0..20_000)
                .map(|_| walk.step(32.0, t, &mut rng).log2() - 5.0)
                .collect();
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt()
        };
        let wide = Walk {
            min: 1e-9,
            max: 1e9,
            ..DIM
        };
        assert!((spread(&wide, 0.1) - 1.4).abs() < 0.05);
        assert!((spread(&wide, 0.5) - 0.85).abs() < 0.05);
        assert!((spread(&wide, 0.9) - 0.3).abs() < 0.02);
        let mut rng = SplitMix64(1);
        for _ in 0..10_000 {
            let e = EPOCHS.step(50.0, 0.0, &mut rng);
            assert!((1.0..=100.0).contains(&e), "{e}");
            let n = NGRAMS.step(1.0, 0.0, &mut rng);
            assert!((1.0..=2.0).contains(&n), "{n}");
        }
    }

    #[test]
    fn normal_samples_have_unit_spread() {
        let mut rng = SplitMix64(3);
        let xs: Vec<f64> = (0..50_000).map(|_| normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.02, "{mean}");
        assert!((var - 1.0).abs() < 0.03, "{var}");
        assert!(xs.iter().all(|x| x.is_finite()));
    }

    #[test]
    fn budget_must_be_positive() {
        assert_eq!(parse_budget("2.5"), Ok(2.5));
        assert!(parse_budget("0").unwrap_err().contains("more than 0"));
        assert!(parse_budget("-3").is_err());
        assert!(parse_budget("soon").unwrap_err().contains("not a number"));
    }
}
