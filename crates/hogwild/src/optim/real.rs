//! The element and index types the kernels are generic over.

use num_traits::Float;

/// A float type the optimizers compute in: f32, f64, and the half types `half::f16` and
/// `half::bf16` (whose arithmetic rounds to the half type after every operation, as TensorFlow's does).
pub trait Real: Float + Send + Sync + std::fmt::Debug + 'static {
    /// Widens to f64, for validation and error messages.
    fn to_f64_lossy(self) -> f64;
}

impl Real for f32 {
    fn to_f64_lossy(self) -> f64 {
        self as f64
    }
}
impl Real for f64 {
    fn to_f64_lossy(self) -> f64 {
        self
    }
}
impl Real for half::f16 {
    fn to_f64_lossy(self) -> f64 {
        self.to_f64()
    }
}
impl Real for half::bf16 {
    fn to_f64_lossy(self) -> f64 {
        self.to_f64()
    }
}

/// An index type for sparse updates (TensorFlow's `Tindices`: int32, int64; also unsigned ids).
pub trait SparseIndex: Copy + Send + Sync {
    /// The row this index names, or `None` when it is negative or does not fit in `usize`.
    fn to_row(self) -> Option<usize>;
    /// The index as written, for error messages.
    fn as_i128(self) -> i128;
}

macro_rules! sparse_index {
    ($($t:ty),*) => {$(
        impl SparseIndex for $t {
            #[inline(always)]
            fn to_row(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
            fn as_i128(self) -> i128 {
                // Every index type fits in i128 (usize is at most 64 bits here).
                i128::try_from(self).unwrap_or(i128::MAX)
            }
        }
    )*};
}
sparse_index!(i32, i64, u32, u64, usize);
