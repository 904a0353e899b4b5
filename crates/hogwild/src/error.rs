//! The crate's one error type.

/// Everything that can go wrong in the core crate. Every message names the thing and the place.
///
/// It composes with `?`: an [`std::io::Error`] converts into [`Error::IoError`] (prefer naming the
/// file, as the crate's own code does with [`Error::Io`]), and a model of your own returns its own
/// failures as [`Error::Model`] ([`Error::model`]). The enum is `Clone` and `PartialEq` so that a
/// run can hand the same error to every thread that asks and tests can compare errors whole;
/// hence the messages of wrapped errors are kept as text.
///
/// ```
/// fn read_first_line(path: &std::path::Path) -> hogwild::Result<String> {
///     let text = std::fs::read_to_string(path)?; // io::Error -> hogwild::Error
///     text.lines().next().map(str::to_string).ok_or_else(|| hogwild::Error::model("an empty file"))
/// }
/// let e = read_first_line("no/such/file".as_ref()).unwrap_err();
/// assert!(matches!(e, hogwild::Error::IoError { kind: std::io::ErrorKind::NotFound, .. }));
/// ```
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    /// Two tensors that must agree in size do not.
    #[error("shape mismatch: {what}: expected {expected}, got {got}")]
    ShapeMismatch {
        /// The tensors compared.
        what: String,
        /// The size wanted.
        expected: String,
        /// The size found.
        got: String,
    },
    /// A sparse index names a row outside the variable.
    #[error("Index {index} at offset {offset} in indices is out of range")]
    IndexOutOfRange {
        /// The index found.
        index: i128,
        /// Its position in the indices.
        offset: usize,
        /// The rows of the variable.
        rows: usize,
    },
    /// A hyper-parameter or optimizer state value is not usable.
    #[error("invalid {name} = {value}: {reason}")]
    InvalidHyperParameter {
        /// The hyper-parameter.
        name: &'static str,
        /// Its value.
        value: f64,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A tensor that must hold data is empty.
    #[error("{what} is empty")]
    Empty {
        /// What is empty.
        what: &'static str,
    },
    /// A file could not be opened, read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// A data feed description (`data.prototxt`) cannot be read or is not usable.
    #[error("data feed desc {origin}: {message}")]
    Desc {
        /// Where the desc came from (a file name, or "text").
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A line of a MultiSlot data file is malformed.
    #[error("{file}:{line}: {}{kind}", slot_prefix(.slot.as_deref()))]
    Parse {
        /// The data file.
        file: String,
        /// The line number, from 1.
        line: u64,
        /// The slot being parsed, or `None` for problems after the last slot.
        slot: Option<String>,
        /// What is wrong with the line.
        kind: crate::feed::LineErrorKind,
    },
    /// Skip mode met more bad lines than its error budget allows.
    #[error("too many bad lines: {bad} of {lines} lines read were bad, over the budget of {budget}; first: {first}")]
    BadLineBudget {
        /// Bad lines met.
        bad: u64,
        /// Lines read.
        lines: u64,
        /// The budget, as configured.
        budget: String,
        /// The first bad line's error.
        first: String,
    },
    /// The `pipe_command` a file is piped through failed or died.
    #[error("pipe_command \"{command}\" failed on {file}: {status}{}", stderr_suffix(.stderr))]
    PipeCommand {
        /// The command.
        command: String,
        /// The file piped through it.
        file: String,
        /// How it ended.
        status: String,
        /// What it wrote to its standard error (possibly shortened).
        stderr: String,
    },
    /// A line of an input file cannot be converted.
    #[error("{file}:{line}: {message}")]
    Convert {
        /// The input file.
        file: String,
        /// The line number, from 1.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A line of a text input that is no training data (a word-vectors file, analogy
    /// questions) is malformed.
    #[error("{file}:{line}: {message}")]
    BadLine {
        /// The file.
        file: String,
        /// The line number, from 1.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// Word vectors cannot be queried (none, a word twice, a value that is no finite number).
    #[error("word vectors: {reason}")]
    Vectors {
        /// What is wrong.
        reason: String,
    },
    /// A parameter table cannot be built with the requested shape.
    #[error("table {table}: {reason}")]
    InvalidTable {
        /// The table's name.
        table: String,
        /// What is wrong.
        reason: String,
    },
    /// A checkpoint file cannot be written or read, or is corrupt.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A model configuration value is missing or unusable.
    #[error("model config: {field}: {reason}")]
    InvalidConfig {
        /// The configuration key.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// An instance of a batch does not fit the model.
    #[error("slot \"{slot}\", instance {instance} of the batch: {reason}")]
    BadInstance {
        /// The slot.
        slot: String,
        /// The instance's position in the batch, from 0.
        instance: usize,
        /// What is wrong.
        reason: String,
    },
    /// A line of a data file that parses but does not fit the model (a label out of range, a word
    /// id past the vocabulary): an [`Error::BadInstance`] whose instance's origin is known.
    #[error("{file}:{line}: slot \"{slot}\": {reason}")]
    BadRecord {
        /// The data file.
        file: String,
        /// The line number, from 1.
        line: u64,
        /// The slot.
        slot: String,
        /// What is wrong.
        reason: String,
    },
    /// A fetch name the model does not produce.
    #[error("unknown fetch \"{name}\": the model reports {available}")]
    UnknownFetch {
        /// The name asked for.
        name: String,
        /// The names the model reports, comma-separated.
        available: String,
    },
    /// A model outside this crate (a TensorFlow graph) failed a step; the message says where.
    #[error("{message}")]
    Step {
        /// What failed, and where.
        message: String,
    },
    /// A model of the user's own (an implementation of [`crate::Model`] outside this crate)
    /// failed; made by [`Error::model`].
    #[error("{message}")]
    Model {
        /// What failed, and where: the model's own message.
        message: String,
    },
    /// An I/O error converted with `?` from [`std::io::Error`], which names no file (the crate's
    /// own errors name it: [`Error::Io`]).
    #[error("I/O error: {message}")]
    IoError {
        /// The error's kind, to match on.
        kind: std::io::ErrorKind,
        /// The operating system's message.
        message: String,
    },
    /// A worker thread returned an error or panicked; the run was stopped.
    #[error("worker thread {thread} failed: {message}")]
    WorkerFailed {
        /// The worker thread, from 0.
        thread: usize,
        /// Its error or panic message.
        message: String,
    },
    /// A run was stopped on request ([`crate::executor::Stop`]) before its end, where a part of
    /// the run is no result (an evaluation, predictions).
    #[error("{what} stopped on request before the end of its data")]
    Stopped {
        /// What was stopped (an evaluation, predictions).
        what: &'static str,
    },
    /// A metric cannot be computed from what the run saw.
    #[error("metric {name}: {reason}")]
    Metric {
        /// The metric.
        name: &'static str,
        /// Why it cannot be computed.
        reason: String,
    },
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
    /// A failure of a model of your own ([`Error::Model`]); the message should name what failed
    /// and where, as the crate's own do (`slot "x", instance 3: ...`).
    pub fn model(message: impl std::fmt::Display) -> Self {
        Error::Model {
            message: message.to_string(),
        }
    }

    /// An I/O error on `path`.
    pub(crate) fn io(path: impl std::fmt::Display, err: &std::io::Error) -> Self {
        Error::Io {
            path: path.to_string(),
            message: err.to_string(),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Error::IoError {
            kind: err.kind(),
            message: err.to_string(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
