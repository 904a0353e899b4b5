//! Optimizers: AdamAsync (DeepRec's asynchronous Adam), Adagrad and SGD.
//!
//! Each optimizer's arithmetic is written once, as a per-element rule (`*_element` functions), and
//! every kernel (dense slices, sparse rows, the TF plugin's kernels through the cxx bridge, the Hogwild
//! store's shared rows) calls that rule, so all of them produce the same bits for the same inputs.

mod adam_async;
mod real;
mod rule;

pub use adam_async::{
    adam_async_element, advance_powers, rmsprop_element, AdamAsync, AdamAsyncState, AdamCoeffs,
};
pub use real::{Real, SparseIndex};
pub use rule::{apply_dense, apply_sparse, Adagrad, Optimizer, Sgd, SlotState};

use crate::{Error, Result};

/// Checks that `indices` address rows of `rows` rows and that `grad` holds one `row_len` row per
/// index. Validates every index before anything is written.
pub fn check_sparse<T, I: SparseIndex>(
    var_len: usize,
    row_len: usize,
    grad: &[T],
    indices: &[I],
) -> Result<usize> {
    if row_len == 0 || var_len == 0 {
        return Err(Error::Empty { what: "var" });
    }
    if !var_len.is_multiple_of(row_len) {
        return Err(Error::ShapeMismatch {
            what: "var length vs row length".into(),
            expected: format!("a multiple of {row_len}"),
            got: var_len.to_string(),
        });
    }
    let expected = indices.len().checked_mul(row_len);
    if expected != Some(grad.len()) {
        return Err(Error::ShapeMismatch {
            what: "grad must be one row per index".into(),
            expected: format!("{} x {row_len}", indices.len()),
            got: grad.len().to_string(),
        });
    }
    let rows = var_len / row_len;
    for (offset, &index) in indices.iter().enumerate() {
        match index.to_row() {
            Some(r) if r < rows => {}
            _ => {
                return Err(Error::IndexOutOfRange {
                    index: index.as_i64(),
                    offset,
                    rows,
                })
            }
        }
    }
    Ok(rows)
}

/// Checks that every slice has the length of the first.
pub(crate) fn check_same_len(what: &'static [&'static str], lens: &[usize]) -> Result<()> {
    let first = lens[0];
    if first == 0 {
        return Err(Error::Empty { what: what[0] });
    }
    for (name, &len) in what.iter().zip(lens).skip(1) {
        if len != first {
            return Err(Error::ShapeMismatch {
                what: format!("{name} vs {}", what[0]),
                expected: first.to_string(),
                got: len.to_string(),
            });
        }
    }
    Ok(())
}
