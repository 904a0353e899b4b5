//! Hogwild training of TensorFlow graphs: a graph exported from Python (a MetaGraphDef with a
//! `train` signature, `init_op` and `train_op` collections and a saver, or a TF1 or TF2
//! SavedModel directory; the contract is docs/runner-contract.md) is loaded into one session,
//! initialised once, and trained by several threads that call `Session::run` on it at the same
//! time: [`TfModel`] is a model of the `hogwild` executor, which runs its steps in its worker
//! threads from the data feed, as it runs the native models. Variables are saved through the
//! graph's own saver, so Python TensorFlow reads them back: a checkpoint for
//! `saver.restore(sess, prefix)`, or for a SavedModel a new SavedModel for
//! `tf.saved_model.load`.
//!
//! `hogwild tf-train` also trains as a worker of a TensorFlow parameter-server cluster: the
//! variables live on the ps tasks, the runner serves its own worker task in-process and is its own
//! master, and worker 0 is the chief ([`ClusterArgs`]; the protocol is in `cluster.rs`).
//!
//! ```no_run
//! use hogwild_tf::{SessionConfig, SlotKind, SlotRef, SlotValuesRef, TfModel};
//!
//! # fn main() -> hogwild_tf::Result<()> {
//! let libs = vec!["build/plugin/libadam_async_ops.so".into()];
//! let model = TfModel::load("build/bow.meta".as_ref(), &libs, &SessionConfig::default())?;
//! model.graph().init()?;
//! let slots = [("words".to_string(), SlotKind::U64), ("label".to_string(), SlotKind::U64)];
//! let mut worker = model.slot_worker(&slots)?;
//! let (words, words_at) = ([3u64, 17, 5], [0usize, 2, 3]);
//! let (label, label_at) = ([1u64, 0], [0usize, 1, 2]);
//! let batch = [
//!     SlotRef { values: SlotValuesRef::U64(&words), offsets: &words_at },
//!     SlotRef { values: SlotValuesRef::U64(&label), offsets: &label_at },
//! ];
//! let mut metrics = vec![0.0; model.metric_names().len()];
//! model.train_slots(&mut worker, &batch, 2, &mut metrics)?;
//! model.graph().save("build/ckpt/model".as_ref())?;
//! # Ok(()) }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

mod cli;
mod cluster;
mod error;
pub mod export;
mod files;
mod graph;
mod import;
mod inputs;
mod model;
mod proto;
mod server;

pub use cli::{summary_line, tf_train, TfTrainArgs, TfTrainReport};
pub use cluster::ClusterArgs;
pub use error::{Error, Result};
pub use files::used_slots;
pub use graph::{SessionConfig, TrainGraph};
pub use import::import_checkpoint;
pub use inputs::{SlotKind, SlotRef, SlotValuesRef};
pub use model::{TfModel, TfWorker};

/// The TensorFlow version the runner is linked against.
pub fn tensorflow_version() -> String {
    tensorflow::version().unwrap_or_else(|e| format!("unknown ({e})"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn links_the_wheel_library() {
        assert_eq!(super::tensorflow_version(), "2.21.0");
    }
}
