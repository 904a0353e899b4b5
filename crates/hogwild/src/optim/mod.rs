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
    AdamRule,
};
pub use real::{Real, SparseIndex};
pub use rule::{apply_dense, apply_sparse, Adagrad, Optimizer, Sgd, SlotState};

use std::collections::hash_map::{Entry, HashMap};
use std::hash::Hash;
use std::ops::Range;

use crate::{Error, Result};

/// Checks a sparse update against a `[rows, row_len]` variable of `var_len` elements stored
/// row-major: `row_len` is positive and divides `var_len`, `grad` holds one `row_len` row per entry of
/// `indices`, and every index names a row. Validates every index before anything is written and
/// returns the number of rows.
pub fn check_sparse<T, I: SparseIndex>(
    var_len: usize,
    row_len: usize,
    grad: &[T],
    indices: &[I],
) -> Result<usize> {
    if var_len == 0 {
        return Err(Error::Empty { what: "var" });
    }
    if row_len == 0 || !var_len.is_multiple_of(row_len) {
        return Err(Error::ShapeMismatch {
            what: "row length vs var length".into(),
            expected: format!("a positive divisor of {var_len}"),
            got: row_len.to_string(),
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
        row_range(index, offset, rows, row_len)?;
    }
    Ok(rows)
}

/// The element range of the row that `index` (at `offset` in the indices) names in a variable of
/// `rows` rows of `row_len` elements, or the out-of-range error. Cannot overflow: a row below `rows`
/// ends at most at `rows * row_len`, the variable's length.
#[inline]
pub(crate) fn row_range<I: SparseIndex>(
    index: I,
    offset: usize,
    rows: usize,
    row_len: usize,
) -> Result<Range<usize>> {
    match index.to_row() {
        Some(row) if row < rows => Ok(row * row_len..(row + 1) * row_len),
        _ => Err(Error::IndexOutOfRange {
            index: index.as_i64(),
            offset,
            rows,
        }),
    }
}

/// Checks that every slice has the length of the first, and that the first is not empty.
pub(crate) fn check_same_len(what: &[&'static str], lens: &[usize]) -> Result<()> {
    let (Some(&first_name), Some(&first)) = (what.first(), lens.first()) else {
        return Ok(());
    };
    if first == 0 {
        return Err(Error::Empty { what: first_name });
    }
    for (name, &len) in what.iter().zip(lens).skip(1) {
        if len != first {
            return Err(Error::ShapeMismatch {
                what: format!("{name} vs {first_name}"),
                expected: first.to_string(),
                got: len.to_string(),
            });
        }
    }
    Ok(())
}

/// Sums the gradient rows of repeated indices, the form DeepRec's Python optimizer gives the sparse
/// op: returns the distinct indices in order of first appearance and one row per distinct index,
/// the sum of its rows added in order of appearance. Index ranges are checked by the apply call.
pub fn sum_duplicate_indices<T: Real, I: SparseIndex + Eq + Hash>(
    grad: &[T],
    indices: &[I],
    row_len: usize,
) -> Result<(Vec<T>, Vec<I>)> {
    if row_len == 0 {
        return Err(Error::ShapeMismatch {
            what: "row length".into(),
            expected: "a positive length".into(),
            got: "0".into(),
        });
    }
    if indices.len().checked_mul(row_len) != Some(grad.len()) {
        return Err(Error::ShapeMismatch {
            what: "grad must be one row per index".into(),
            expected: format!("{} x {row_len}", indices.len()),
            got: grad.len().to_string(),
        });
    }
    let mut position = HashMap::with_capacity(indices.len());
    let mut unique = Vec::with_capacity(indices.len());
    let mut summed: Vec<T> = Vec::with_capacity(grad.len());
    for (&index, g) in indices.iter().zip(grad.chunks_exact(row_len)) {
        match position.entry(index) {
            Entry::Occupied(slot) => {
                let start = *slot.get() * row_len;
                // In bounds: every stored position has a row in `summed`.
                for (s, &g) in summed[start..start + row_len].iter_mut().zip(g) {
                    *s = *s + g;
                }
            }
            Entry::Vacant(slot) => {
                slot.insert(unique.len());
                unique.push(index);
                summed.extend_from_slice(g);
            }
        }
    }
    Ok((summed, unique))
}
