//! The `Model` trait: what the executor needs from a model (bag-of-words, word2vec, CTR models, or a
//! user's own) to train it Hogwild-style from files and to evaluate it.
//!
//! A model owns its parameters in [`Table`]s of the Hogwild store and is shared by reference between
//! all worker threads (`Sync`); everything a thread needs for itself (activations, gradients, scratch
//! buffers) lives in its [`Model::Worker`], created once per thread and reused for every batch.
//! A worker computes single-threaded: the executor's threads are the only parallelism.
//!
//! # A model of your own
//!
//! A linear regression `y ≈ w·x + b` over a dense float slot `x` (two values per instance) and
//! a float label `y`, trained Hogwild-style from a MultiSlot file (each line holds every slot
//! of the desc in order, as `<count> <values...>`: `2 0.5 1.0 1 1.5` is `x = [0.5, 1.0]`,
//! `y = 1.5`). Its one [`Table`] row holds the weights and the bias; each batch is one
//! optimizer step, the [`Table::begin`] -> [`Table::update_row`] -> [`Table::finish`]
//! protocol of the store:
//!
//! ```
//! use hogwild::feed::{Batch, DataFeedDesc, Slot, SlotType};
//! use hogwild::model::{used_slot, Model, StageTimes};
//! use hogwild::optim::Sgd;
//! use hogwild::{executor::Run, Error, Result, Table};
//!
//! /// Row 0 of `params`: the weights of `x`, then the bias.
//! struct LinReg {
//!     params: Table,
//!     opt: Sgd<f32>,
//! }
//! /// A thread's slot positions and gradient buffer.
//! struct Worker {
//!     x: usize,
//!     y: usize,
//!     grad: Vec<f32>,
//! }
//!
//! impl LinReg {
//!     /// The error of instance `i` (prediction minus label), and its `x`.
//!     fn error<'b>(&self, w: &Worker, batch: &'b Batch, i: usize) -> Result<(f32, &'b [f32])> {
//!         let x = batch.slots[w.x].f32s(i).unwrap(); // `used_slot` checked the type
//!         if x.len() + 1 != self.params.dim() {
//!             return Err(Error::model(format!("slot \"x\", instance {i}: {} values", x.len())));
//!         }
//!         let bias = self.params.weights(0)[x.len()].load();
//!         Ok((self.params.dot(0, x) + bias - batch.slots[w.y].f32s(i).unwrap()[0], x))
//!     }
//! }
//!
//! impl Model for LinReg {
//!     type Worker = Worker;
//!     fn metrics(&self) -> Vec<String> {
//!         vec!["mse".into()]
//!     }
//!     fn startup(&self) {} // zero weights are a fine start
//!     fn worker(&self, desc: &DataFeedDesc) -> Result<Worker> {
//!         let (x, y) = (used_slot(desc, "x", SlotType::F32)?, used_slot(desc, "y", SlotType::F32)?);
//!         Ok(Worker { x, y, grad: vec![1.0; self.params.dim()] }) // the bias's gradient stays 1
//!     }
//!     fn train_batch(&self, w: &mut Worker, batch: &Batch, out: &mut [f64], _: Option<&mut StageTimes>) -> Result<()> {
//!         let step = self.params.begin(&self.opt, false)?; // dense: every weight moves
//!         let mut squares = 0.0;
//!         for i in 0..batch.len {
//!             let (e, x) = self.error(w, batch, i)?;
//!             squares += f64::from(e * e);
//!             w.grad[..x.len()].copy_from_slice(x);
//!             self.params.update_row(&self.opt, &step, 0, &w.grad, 2.0 * e); // gradient 2e·(x, 1)
//!         }
//!         self.params.finish(&self.opt, false, 1); // one row touched
//!         out[0] = squares / batch.len as f64;
//!         Ok(())
//!     }
//!     fn eval_batch(&self, w: &mut Worker, batch: &Batch, out: &mut [f64], _: Option<&mut String>) -> Result<()> {
//!         let squares: Result<f64> = (0..batch.len).map(|i| Ok(f64::from(self.error(w, batch, i)?.0.powi(2)))).sum();
//!         out[0] = squares? / batch.len as f64;
//!         Ok(())
//!     }
//!     fn tables(&self) -> Vec<&Table> {
//!         vec![&self.params]
//!     }
//!     fn describe(&self) -> String {
//!         format!("linreg {}", self.params.dim() - 1)
//!     }
//! }
//!
//! # fn main() -> Result<()> {
//! let dir = std::env::temp_dir().join(format!("hogwild-linreg-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let file = dir.join("train.txt");
//! let lines: String = (0..200).map(|i| {
//!     let (a, b) = ((i % 10) as f32 / 10.0, (i % 7) as f32 / 7.0);
//!     format!("2 {a} {b} 1 {}\n", 2.0 * a - b + 0.5)
//! }).collect();
//! std::fs::write(&file, lines)?;
//! let desc = DataFeedDesc::multi_slot(10, vec![Slot::dense("x", SlotType::F32, &[2]), Slot::dense("y", SlotType::F32, &[1])]);
//! let opt = Sgd { lr: 0.05f32 };
//! let model = LinReg { params: Table::new("params", 1, 3, &opt)?, opt };
//! let quiet = hogwild::RunOptions { print_period: 0, ..Default::default() };
//! for _ in 0..30 {
//!     Run::new(&model, &desc).threads(2).options(&quiet).train(&[&file])?;
//! }
//! let mse = Run::new(&model, &desc).options(&quiet).eval(&[&file])?.get("mse").unwrap();
//! assert!(mse < 1e-3, "mse {mse}");
//! let mut w = [0.0f32; 3];
//! model.params.read_weights(0, &mut w);
//! assert!((w[0] - 2.0).abs() < 0.1 && (w[1] + 1.0).abs() < 0.1 && (w[2] - 0.5).abs() < 0.1, "{w:?}");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use crate::checkpoint::Section;
use crate::feed::{Batch, DataFeedDesc, InMemoryDataset, SlotType};
use crate::metrics::Auc;
use crate::store::Table;
use crate::{Error, Result};

/// The position of the used slot `name` of `desc` among its used slots: the index of its
/// values in every [`Batch::slots`]. Fails, naming the slot, when `desc` has no such used slot
/// or holds it with another type than `kind`: what [`Model::worker`] checks.
pub fn used_slot(desc: &DataFeedDesc, name: &str, kind: SlotType) -> Result<usize> {
    let used = desc.used_slots();
    let at = used
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(|| Error::InvalidConfig {
            field: format!("slot \"{name}\""),
            reason: "the DataFeedDesc has no used slot of that name".into(),
        })?;
    if used[at].slot_type() != kind {
        return Err(Error::InvalidConfig {
            field: format!("slot \"{name}\""),
            reason: format!(
                "must be a {} slot in the DataFeedDesc, not {}",
                kind.name(),
                used[at].slot_type().name()
            ),
        });
    }
    Ok(at)
}

/// Time spent per stage, summed over batches (and threads, in a run's report). Filled only in
/// debug mode.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimes {
    /// Waiting for a batch from the feed.
    pub read: Duration,
    /// Computing the predictions.
    pub forward: Duration,
    /// Computing the gradients.
    pub backward: Duration,
    /// Applying them to the tables.
    pub update: Duration,
}

impl StageTimes {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &StageTimes) {
        self.read += other.read;
        self.forward += other.forward;
        self.backward += other.backward;
        self.update += other.update;
    }

    /// The total over all stages.
    pub fn total(&self) -> Duration {
        self.read + self.forward + self.backward + self.update
    }
}

/// The length of a training run, which the executor gives the model before the run's first batch
/// ([`Model::plan`]): a model whose learning rate decays over the run (to zero at its end, as
/// fastText and word2vec do) needs it.
pub struct RunPlan<'a> {
    /// Passes over the data.
    pub epochs: usize,
    /// Epochs of the schedule trained before this run (0 unless the run is part of a longer
    /// one, [`RunPlan::within`]).
    pub before: usize,
    /// Epochs of the whole schedule the run is part of (`epochs` for a run on its own).
    pub total: usize,
    instances: &'a (dyn Fn() -> Result<u64> + Sync),
}

impl<'a> RunPlan<'a> {
    /// A plan of `epochs` passes over data of `instances_per_epoch()` instances, counted only if
    /// a model asks (a streaming run reads its files once more to count them).
    pub fn new(epochs: usize, instances_per_epoch: &'a (dyn Fn() -> Result<u64> + Sync)) -> Self {
        Self {
            epochs,
            before: 0,
            total: epochs,
            instances: instances_per_epoch,
        }
    }

    /// The plan placed in a schedule of `total` epochs after `before` of them (a schedule
    /// shorter than `before + epochs` is taken as that long).
    pub fn within(self, before: usize, total: usize) -> Self {
        Self {
            before,
            total: total.max(before + self.epochs),
            ..self
        }
    }

    /// The instances of one pass (every file's lines, for a streaming run).
    pub fn instances_per_epoch(&self) -> Result<u64> {
        (self.instances)()
    }
}

/// A model the executor can train and evaluate.
pub trait Model: Send + Sync {
    /// One thread's private state: scratch buffers, slot positions.
    type Worker: Send;

    /// The values the model reports per batch (e.g. `["loss", "accuracy"]`), each a mean over the
    /// batch's instances; the executor averages them over batches and threads, each batch
    /// weighted by its instances. Asked once per run (a graph's names are known only once it is
    /// loaded).
    fn metrics(&self) -> Vec<String>;

    /// The startup step, run once before the first training run (not when resuming from a
    /// checkpoint): initialises the parameters.
    fn startup(&self);

    /// A worker for batches laid out by `desc`; fails when `desc` lacks a slot the model reads, or
    /// holds it with the wrong type.
    fn worker(&self, desc: &DataFeedDesc) -> Result<Self::Worker>;

    /// The workers of `threads` threads that run together, as the executor creates them. The
    /// default is [`Model::worker`] for each; a model whose workers work differently when others
    /// write the same parameters at the same time overrides it (a CTR model steps private copies
    /// of its often-used rows only then).
    fn workers(&self, desc: &DataFeedDesc, threads: usize) -> Result<Vec<Self::Worker>> {
        (0..threads).map(|_| self.worker(desc)).collect()
    }

    /// Called by the executor before each training run, on one thread, before the run's first
    /// batch (its workers may exist already: they are made first, to check the desc): the run's
    /// length. A model whose training depends on it (a learning rate decaying to zero
    /// over the run) sets that up here; whoever calls [`Model::train_batch`] directly calls it
    /// first. The default needs nothing.
    fn plan(&self, _plan: &RunPlan<'_>) -> Result<()> {
        Ok(())
    }

    /// Called by the executor before a training run of more than one epoch over an in-memory
    /// dataset (after [`Model::plan`]), with the run's thread count: a model that trains from what it derives
    /// of each record (a CTR model's hashed rows, values and labels) may derive it here, once
    /// for the run instead of once per epoch, and return the bytes it keeps. The run's batches
    /// then hold their instances by record number alone, without values (the executor's
    /// batches only: [`Model::train_batch`] called directly gets whole batches), until
    /// [`Model::release_dataset`]. A record the model refuses fails the run here, before
    /// anything trains. The default keeps nothing (`None`): batches hold the values.
    fn prepare_dataset(
        &self,
        _desc: &DataFeedDesc,
        _data: &InMemoryDataset,
        _threads: usize,
    ) -> Result<Option<usize>> {
        Ok(None)
    }

    /// Called by the executor after every run that [`Model::prepare_dataset`] prepared for,
    /// however it ended: drops what it kept.
    fn release_dataset(&self) {}

    /// Trains on one batch and writes the batch's metrics (in `metrics()` order) into `out`.
    /// `stages`, when given, receives the forward, backward and update times.
    fn train_batch(
        &self,
        worker: &mut Self::Worker,
        batch: &Batch,
        out: &mut [f64],
        stages: Option<&mut StageTimes>,
    ) -> Result<()>;

    /// Evaluates one batch without changing the parameters: metrics into `out` and, when
    /// `predictions` is given, one line per instance appended to it.
    fn eval_batch(
        &self,
        worker: &mut Self::Worker,
        batch: &Batch,
        out: &mut [f64],
        predictions: Option<&mut String>,
    ) -> Result<()>;

    /// Checks instance `i` of `batch` as training and evaluation check it (a label in range, word
    /// ids within the vocabulary, values matching their ids), computing nothing, so that a
    /// checker can list every line the model would refuse before a run (`hogwild check
    /// --config`). Fails with [`crate::Error::BadInstance`]. The label is checked when `worker`
    /// was made for a desc that has it. The default accepts every instance.
    fn check_instance(&self, _worker: &mut Self::Worker, _batch: &Batch, _i: usize) -> Result<()> {
        Ok(())
    }

    /// Checks that `desc` holds what the model's metrics need besides its inputs (a label slot):
    /// evaluation calls it, prediction does not. The default needs nothing.
    fn check_metrics_desc(&self, _desc: &DataFeedDesc) -> Result<()> {
        Ok(())
    }

    /// Writes back to the shared tables what `worker` has trained but holds privately (a CTR
    /// model's copies of its hot rows, written back every few batches), and to the model what it
    /// has counted in an evaluation (the bag-of-words model's top-k counts). The executor calls it
    /// whenever a thread leaves an epoch's batches (before the epoch is counted as trained, so
    /// that its report and checkpoint hold every batch of it) and when a thread stops; whoever
    /// calls [`Model::train_batch`] directly calls it before reading or saving the tables. The
    /// default holds nothing back.
    fn flush(&self, _worker: &mut Self::Worker) {}

    /// The parameter tables, for checkpoints and memory accounting.
    fn tables(&self) -> Vec<&Table>;

    /// A text description from which the model can be rebuilt (its configuration); stored in
    /// checkpoints.
    fn describe(&self) -> String;

    /// What else a checkpoint must hold to rebuild the model and read its outputs, besides the
    /// description and the tables (word2vec: the word of every row), as named strings of bytes.
    /// Stored inside the checkpoint, under its checksum, so that a checkpoint never depends on
    /// another file that a later run could change. The default holds nothing.
    fn sections(&self) -> Vec<Section> {
        Vec::new()
    }

    /// Values over a whole run rather than means of per-batch values (words trained), each
    /// since the previous call: the executor calls it once before a run (discarding what it
    /// returns) and once after, appending the values to the run's fetched metrics. In-memory
    /// training also calls it as each epoch ends and reports those values in the epoch's report,
    /// the run's being their sum: the values are counts, which add up.
    fn run_metrics(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// For binary tasks: the worker's collector of (score, label) pairs, which the model fills in
    /// `eval_batch` (and in `train_batch` when training should report it too). The executor
    /// drains every thread's collector at the end of each epoch and run, merges them and reports
    /// the exact AUC as the fetched value `auc`.
    fn auc<'w>(&self, _worker: &'w mut Self::Worker) -> Option<&'w mut Auc> {
        None
    }
}
