//! A TensorFlow training graph as a model of the executor: per-thread workers that turn batches
//! into feeds and run train or eval steps on the shared session, so `hogwild tf-train` runs
//! through the same worker loop as `hogwild train`.

use std::path::{Path, PathBuf};

use hogwild::feed::{Batch, DataFeedDesc, SlotValues};
use hogwild::model::{Model, StageTimes};
use hogwild::Table;

use crate::files::used_slots;
use crate::graph::{SessionConfig, TrainGraph, EVAL_SIGNATURE};
use crate::inputs::{Binding, SlotKind, SlotRef, SlotValuesRef};
use crate::Result;

/// A loaded training graph plus the names of its fetched values.
#[derive(Debug)]
pub struct TfModel {
    graph: TrainGraph,
    metrics: Vec<String>,
    path: PathBuf,
}

/// One thread's state: the slot bindings of the training and the evaluation signature and the
/// number of batches it ran (for error messages).
#[derive(Debug)]
pub struct TfWorker {
    train: Binding,
    eval: Option<Binding>,
    batches: u64,
}

impl TfWorker {
    /// Batches this worker has run.
    pub fn batches(&self) -> u64 {
        self.batches
    }
}

impl TfModel {
    /// Loads `op_libraries`, then the MetaGraphDef at `graph`; see [`TrainGraph::load`].
    pub fn load(graph: &Path, op_libraries: &[PathBuf], config: &SessionConfig) -> Result<Self> {
        let path = graph.to_path_buf();
        let graph = TrainGraph::load(graph, op_libraries, config)?;
        let metrics = graph
            .output_names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        Ok(TfModel {
            graph,
            metrics,
            path,
        })
    }

    /// The graph and its session.
    pub fn graph(&self) -> &TrainGraph {
        &self.graph
    }

    /// Closes the session (see [`TrainGraph::close`]).
    pub fn close(&mut self) -> Result<()> {
        self.graph.close()
    }

    /// The fetched values' names, in the order steps report them (`loss` first).
    pub fn metric_names(&self) -> &[String] {
        &self.metrics
    }

    /// A worker for batches whose used slots are `slots` (name, kind), in batch order.
    pub fn slot_worker(&self, slots: &[(String, SlotKind)]) -> Result<TfWorker> {
        let train = Binding::new(&self.graph.signature(true)?.inputs, slots)?;
        // None when the graph cannot evaluate (a TF2 SavedModel without an `eval` signature):
        // an evaluation step then fails with the graph's reason.
        let eval = match self.graph.signature(false) {
            Ok(s) if self.graph.has_eval_signature() => {
                Some(Binding::new(&s.inputs, slots).map_err(|e| match e {
                    crate::Error::SlotMismatch { slot, reason } => crate::Error::SlotMismatch {
                        slot,
                        reason: format!("signature \"{EVAL_SIGNATURE}\": {reason}"),
                    },
                    e => e,
                })?)
            }
            Ok(_) => Some(train.clone()),
            Err(_) => None,
        };
        Ok(TfWorker {
            train,
            eval,
            batches: 0,
        })
    }

    /// Runs one training step on a batch of `instances` instances given as its used slots;
    /// writes the fetched values (in [`TfModel::metric_names`] order) into `out`.
    pub fn train_slots(
        &self,
        worker: &mut TfWorker,
        slots: &[SlotRef<'_>],
        instances: usize,
        out: &mut [f64],
    ) -> Result<()> {
        self.step(worker, slots, instances, out, true)
    }

    /// Evaluates a batch given as its used slots without changing the variables.
    pub fn eval_slots(
        &self,
        worker: &mut TfWorker,
        slots: &[SlotRef<'_>],
        instances: usize,
        out: &mut [f64],
    ) -> Result<()> {
        self.step(worker, slots, instances, out, false)
    }

    fn step(
        &self,
        worker: &mut TfWorker,
        slots: &[SlotRef<'_>],
        instances: usize,
        out: &mut [f64],
        train: bool,
    ) -> Result<()> {
        let batch = worker.batches;
        worker.batches += 1;
        let binding = match (train, &worker.eval) {
            (true, _) => &worker.train,
            (false, Some(eval)) => eval,
            (false, None) => {
                self.graph.signature(false)?;
                &worker.train
            }
        };
        let feeds = binding.tensors(slots, instances, batch)?;
        let during = || {
            format!(
                "{} batch {batch} of this thread ({instances} instances)",
                if train { "training on" } else { "evaluating" }
            )
        };
        self.graph.step(&feeds, train, &during, out)
    }
}

/// A feed batch's used slots, as the graph's inputs take them.
fn slot_refs(batch: &Batch) -> Vec<SlotRef<'_>> {
    batch
        .slots
        .iter()
        .map(|s| SlotRef {
            values: match &s.values {
                SlotValues::U64(v) => SlotValuesRef::U64(v),
                SlotValues::F32(v) => SlotValuesRef::F32(v),
            },
            offsets: &s.offsets,
        })
        .collect()
}

fn step_error(e: crate::Error) -> hogwild::Error {
    match e {
        crate::Error::Hogwild(e) => e,
        e => hogwild::Error::Step {
            message: e.to_string(),
        },
    }
}

impl Model for TfModel {
    type Worker = TfWorker;

    fn metrics(&self) -> Vec<String> {
        self.metrics.clone()
    }

    /// Nothing: the graph's variables are initialised ([`TrainGraph::init`]) or restored
    /// ([`TrainGraph::restore`]) by whoever loads it, which can fail with TensorFlow's message.
    fn startup(&self) {}

    fn worker(&self, desc: &DataFeedDesc) -> hogwild::Result<TfWorker> {
        self.slot_worker(&used_slots(desc)).map_err(step_error)
    }

    fn train_batch(
        &self,
        worker: &mut TfWorker,
        batch: &Batch,
        out: &mut [f64],
        _stages: Option<&mut StageTimes>,
    ) -> hogwild::Result<()> {
        self.train_slots(worker, &slot_refs(batch), batch.len, out)
            .map_err(step_error)
    }

    fn eval_batch(
        &self,
        worker: &mut TfWorker,
        batch: &Batch,
        out: &mut [f64],
        _predictions: Option<&mut String>,
    ) -> hogwild::Result<()> {
        self.eval_slots(worker, &slot_refs(batch), batch.len, out)
            .map_err(step_error)
    }

    /// None: the variables live in the TensorFlow session and are saved by its saver.
    fn tables(&self) -> Vec<&Table> {
        Vec::new()
    }

    fn describe(&self) -> String {
        format!("TensorFlow graph {}", self.path.display())
    }
}
