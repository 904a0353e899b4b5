//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while loading or running a TensorFlow graph. Every message names
/// the file, tensor, op, slot or batch involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory (a graph, a checkpoint, an export's output).
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The graph (a MetaGraphDef file or a SavedModel directory) does not follow the runner's
    /// contract (docs/runner-contract.md), does not fit the options it is run with (a cluster
    /// graph without `--ps-hosts`, `--eval` without an `eval` signature), or a checkpoint read
    /// into a native model's tables has a tensor of the wrong shape.
    #[error("{path}: {reason}")]
    BadGraph {
        /// The graph file, SavedModel directory or checkpoint prefix.
        path: PathBuf,
        /// What is missing or wrong, naming the signature, collection, op or tensor.
        reason: String,
    },
    /// An op library could not be loaded.
    #[error("cannot load op library {path}: {message}")]
    OpLibrary {
        /// The shared library given with `--op-library`.
        path: PathBuf,
        /// TensorFlow's status message (a missing file, an undefined symbol, an op registered
        /// twice).
        message: String,
    },
    /// TensorFlow refused the graph (e.g. an op type no loaded library registers).
    #[error("{path}: TensorFlow cannot import the graph: {message}{hint}")]
    Import {
        /// The graph file or SavedModel directory.
        path: PathBuf,
        /// TensorFlow's status message.
        message: String,
        /// What to do about it, when the message says enough to know (`--op-library` for an
        /// op type that is not registered); empty otherwise.
        hint: &'static str,
    },
    /// The graph's inputs and the data feed's slots do not fit together.
    #[error("slot \"{slot}\": {reason}")]
    SlotMismatch {
        /// The data-feed slot (or signature input) that has no partner or the wrong dtype.
        slot: String,
        /// What does not fit, naming the signature inputs.
        reason: String,
    },
    /// A batch cannot be turned into the tensors the graph takes.
    #[error("batch {batch}, slot \"{slot}\": {reason}")]
    BadBatch {
        /// The batch's number among those its worker thread has run (from 0).
        batch: u64,
        /// The slot whose values do not fit its input (`*` when the batch has the wrong number
        /// of slots).
        slot: String,
        /// What is wrong: offsets that do not fit the values, a dense slot whose instances hold
        /// different counts, a `uint64` id beyond int64, more values than int32 row splits
        /// hold.
        reason: String,
    },
    /// TensorFlow failed while running the graph; `during` says what was run (the init op, a
    /// batch, a checkpoint), the message names the failing op.
    #[error("{during}: {message}")]
    Run {
        /// What was run: `running the init op "init"`, `training on batch 12 of this thread
        /// (64 instances)`, `saving checkpoint build/ckpt/model`, ...
        during: String,
        /// TensorFlow's status message.
        message: String,
    },
    /// A fetched value is not a single float.
    #[error("output \"{output}\" ({tensor}): {reason}")]
    BadOutput {
        /// The signature's output key (the metric's name) or the collection it came from.
        output: String,
        /// The tensor fetched for it (`op:index`).
        tensor: String,
        /// What it holds instead: its dtype or its number of elements.
        reason: String,
    },
    /// An option's value does not fit the others (checked before any work starts).
    #[error("{option}: {reason}")]
    BadOption {
        /// The command-line option, as the user writes it (`--save`, `-o`, `--format`).
        option: &'static str,
        /// What is wrong with its value and what to give instead.
        reason: String,
    },
    /// The in-process TensorFlow server of the runner's cluster task could not start.
    #[error("cannot start the TensorFlow server of {task}: {message}")]
    Server {
        /// The task, `/job:worker/task:<i>`.
        task: String,
        /// TensorFlow's status message (e.g. the port is taken).
        message: String,
    },
    /// The rest of the cluster did not answer or did not do its part in time.
    #[error("{task}: {reason}")]
    Cluster {
        /// This runner's task: `worker task <i> of <n> (<host:port>)`, and whether it is the
        /// chief.
        task: String,
        /// What it waited for and for how long (`--wait-timeout`), or what the cluster
        /// answered.
        reason: String,
    },
    /// The data feed or the executor failed.
    #[error(transparent)]
    Hogwild(#[from] hogwild::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
