//! The plugin crate's one error type. Its `Display` text becomes the message of the TensorFlow
//! `InvalidArgument` status the C++ kernel returns.

/// Everything the bridge can report to a kernel.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The core crate rejected the inputs (shapes, an index, a hyper-parameter).
    #[error(transparent)]
    Core(#[from] hogwild::Error),
    /// A tensor's bytes cannot be read as elements of the kernel's type.
    #[error("{tensor}: {len} bytes cannot be read as {dtype} elements ({reason})")]
    Bytes {
        /// The op input: `var`, `m`, `grad`, `indices`, `beta1_power`, ...
        tensor: &'static str,
        /// The element type it was read as, as TensorFlow names it (`float`, `half`, `int64`).
        dtype: &'static str,
        /// The buffer's size in bytes.
        len: usize,
        /// What is wrong: not a whole number of elements, a null or misaligned address, not
        /// one element where one is needed.
        reason: String,
    },
    /// Two tensors passed for exclusive access share memory.
    #[error("{first} and {second} share memory, which exclusive access rules out")]
    Overlap {
        /// One op input.
        first: &'static str,
        /// The other op input, whose bytes overlap the first's.
        second: &'static str,
    },
    /// The coefficients were computed for another element type than the tensors passed.
    #[error("coefficients computed for {coeffs}, tensors are {tensors}")]
    DTypeMismatch {
        /// The element type the coefficients were computed for.
        coeffs: &'static str,
        /// The element type of the tensors of the update.
        tensors: &'static str,
    },
    /// A dtype or index type the bridge does not know (a C++ enum value out of range).
    #[error("unsupported {what} code {code}")]
    Unsupported {
        /// Which enum: `dtype`, `index type` or `access`.
        what: &'static str,
        /// The value C++ passed.
        code: u8,
    },
    /// A panic inside the Rust code; caught so that it never unwinds into TensorFlow.
    #[error("internal error in the AdamAsync kernel: {0}")]
    Panic(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
