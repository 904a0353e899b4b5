//! A TensorFlow training graph as a model: per-thread workers that turn batches into feeds and run
//! train or eval steps on the shared session.

use std::path::{Path, PathBuf};

use crate::graph::{SessionConfig, TrainGraph};
use crate::inputs::{Binding, SlotKind, SlotRef};
use crate::Result;

/// A loaded training graph plus the names of its fetched values.
#[derive(Debug)]
pub struct TfModel {
    graph: TrainGraph,
    metrics: Vec<String>,
}

/// One thread's state: the slot binding and the number of batches it ran (for error messages).
#[derive(Debug)]
pub struct TfWorker {
    binding: Binding,
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
        let graph = TrainGraph::load(graph, op_libraries, config)?;
        let metrics = graph
            .output_names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        Ok(TfModel { graph, metrics })
    }

    /// The graph and its session.
    pub fn graph(&self) -> &TrainGraph {
        &self.graph
    }

    /// The fetched values' names, in the order steps report them (`loss` first).
    pub fn metrics(&self) -> &[String] {
        &self.metrics
    }

    /// A worker for batches whose used slots are `slots` (name, kind), in batch order.
    pub fn worker(&self, slots: &[(String, SlotKind)]) -> Result<TfWorker> {
        Ok(TfWorker {
            binding: Binding::new(&self.graph, slots)?,
            batches: 0,
        })
    }

    /// Runs one training step on a batch of `instances` instances; writes the fetched values
    /// (in [`TfModel::metrics`] order) into `out`.
    pub fn train_batch(
        &self,
        worker: &mut TfWorker,
        slots: &[SlotRef<'_>],
        instances: usize,
        out: &mut [f64],
    ) -> Result<()> {
        self.step(worker, slots, instances, out, true)
    }

    /// Evaluates a batch without changing the variables.
    pub fn eval_batch(
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
        let feeds = worker.binding.tensors(slots, instances, batch)?;
        let during = || {
            format!(
                "{} batch {batch} of this thread ({instances} instances)",
                if train { "training on" } else { "evaluating" }
            )
        };
        self.graph.step(&feeds, train, &during, out)
    }
}
