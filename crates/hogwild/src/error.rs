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
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
