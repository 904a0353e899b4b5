//! The crate's one error type.

/// Everything that can go wrong in the core crate. Every message names the thing and the place.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    /// Two tensors that must agree in size do not.
    #[error("shape mismatch: {what}: expected {expected}, got {got}")]
    ShapeMismatch {
        what: String,
        expected: String,
        got: String,
    },
    /// A sparse index names a row outside the variable.
    #[error("Index {index} at offset {offset} in indices is out of range")]
    IndexOutOfRange {
        index: i128,
        offset: usize,
        rows: usize,
    },
    /// A hyper-parameter or optimizer state value is not usable.
    #[error("invalid {name} = {value}: {reason}")]
    InvalidHyperParameter {
        name: &'static str,
        value: f64,
        reason: &'static str,
    },
    /// A tensor that must hold data is empty.
    #[error("{what} is empty")]
    Empty { what: &'static str },
    /// A file could not be opened, read or written.
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    /// A data feed description (`data.prototxt`) cannot be read or is not usable.
    #[error("data feed desc {origin}: {message}")]
    Desc { origin: String, message: String },
    /// A line of a MultiSlot data file is malformed.
    #[error("{file}:{line}: {}{kind}", slot_prefix(.slot.as_deref()))]
    Parse {
        file: String,
        line: u64,
        /// The slot being parsed, or `None` for problems after the last slot.
        slot: Option<String>,
        kind: crate::feed::LineErrorKind,
    },
    /// Skip mode met more bad lines than its error budget allows.
    #[error("too many bad lines: {bad} of {lines} lines read were bad, over the budget of {budget}; first: {first}")]
    BadLineBudget {
        bad: u64,
        lines: u64,
        budget: String,
        first: String,
    },
    /// The `pipe_command` a file is piped through failed or died.
    #[error("pipe_command \"{command}\" failed on {file}: {status}{}", stderr_suffix(.stderr))]
    PipeCommand {
        command: String,
        file: String,
        status: String,
        stderr: String,
    },
    /// A line of an input file cannot be converted.
    #[error("{file}:{line}: {message}")]
    Convert {
        file: String,
        line: u64,
        message: String,
    },
    /// A line of a text input that is no training data (a word-vectors file, analogy
    /// questions) is malformed.
    #[error("{file}:{line}: {message}")]
    BadLine {
        file: String,
        line: u64,
        message: String,
    },
    /// Word vectors cannot be queried (none, a word twice, a value that is no finite number).
    #[error("word vectors: {reason}")]
    Vectors { reason: String },
    /// A parameter table cannot be built with the requested shape.
    #[error("table {table}: {reason}")]
    InvalidTable { table: String, reason: String },
    /// A checkpoint file cannot be written or read, or is corrupt.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint { path: String, reason: String },
    /// A model configuration value is missing or unusable.
    #[error("model config: {field}: {reason}")]
    InvalidConfig { field: String, reason: String },
    /// An instance of a batch does not fit the model.
    #[error("slot \"{slot}\", instance {instance} of the batch: {reason}")]
    BadInstance {
        slot: String,
        instance: usize,
        reason: String,
    },
    /// A line of a data file that parses but does not fit the model (a label out of range, a word
    /// id past the vocabulary): an [`Error::BadInstance`] whose instance's origin is known.
    #[error("{file}:{line}: slot \"{slot}\": {reason}")]
    BadRecord {
        file: String,
        line: u64,
        slot: String,
        reason: String,
    },
    /// A fetch name the model does not produce.
    #[error("unknown fetch \"{name}\": the model reports {available}")]
    UnknownFetch { name: String, available: String },
    /// A worker thread returned an error or panicked; the run was stopped.
    /// A model outside this crate (a TensorFlow graph) failed a step; the message says where.
    #[error("{message}")]
    Step { message: String },
    #[error("worker thread {thread} failed: {message}")]
    WorkerFailed { thread: usize, message: String },
    /// A run was stopped on request ([`crate::executor::Stop`]) before its end, where a part of
    /// the run is no result (an evaluation, predictions).
    #[error("{what} stopped on request before the end of its data")]
    Stopped { what: &'static str },
    /// A metric cannot be computed from what the run saw.
    #[error("metric {name}: {reason}")]
    Metric { name: &'static str, reason: String },
}

fn slot_prefix(slot: Option<&str>) -> String {
    slot.map(|name| format!("slot \"{name}\": "))
        .unwrap_or_default()
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!("; stderr: {stderr}")
    }
}

impl Error {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl std::fmt::Display, err: &std::io::Error) -> Self {
        Error::Io {
            path: path.to_string(),
            message: err.to_string(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
