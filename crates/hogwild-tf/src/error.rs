//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while loading or running a TensorFlow graph. Every message names
/// the file, tensor, op, slot or batch involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The graph file is not a usable MetaGraphDef.
    #[error("{path}: {reason}")]
    BadGraph { path: PathBuf, reason: String },
    /// An op library could not be loaded.
    #[error("cannot load op library {path}: {message}")]
    OpLibrary { path: PathBuf, message: String },
    /// TensorFlow refused the graph (e.g. an op type no loaded library registers).
    #[error("{path}: TensorFlow cannot import the graph: {message}{hint}")]
    Import {
        path: PathBuf,
        message: String,
        hint: &'static str,
    },
    /// The graph's inputs and the data feed's slots do not fit together.
    #[error("slot \"{slot}\": {reason}")]
    SlotMismatch { slot: String, reason: String },
    /// A batch cannot be turned into the tensors the graph takes.
    #[error("batch {batch}, slot \"{slot}\": {reason}")]
    BadBatch {
        batch: u64,
        slot: String,
        reason: String,
    },
    /// TensorFlow failed while running the graph; `during` says what was run (the init op, a
    /// batch, a checkpoint), the message names the failing op.
    #[error("{during}: {message}")]
    Run { during: String, message: String },
    /// A fetched value is not a single float.
    #[error("output \"{output}\" ({tensor}): {reason}")]
    BadOutput {
        output: String,
        tensor: String,
        reason: String,
    },
    /// An option's value does not fit the others (checked before any work starts).
    #[error("{option}: {reason}")]
    BadOption {
        option: &'static str,
        reason: String,
    },
    /// The in-process TensorFlow server of the runner's cluster task could not start.
    #[error("cannot start the TensorFlow server of {task}: {message}")]
    Server { task: String, message: String },
    /// The rest of the cluster did not answer or did not do its part in time.
    #[error("{task}: {reason}")]
    Cluster { task: String, reason: String },
    /// The data feed or the executor failed.
    #[error(transparent)]
    Hogwild(#[from] hogwild::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
