//! Optimizers: AdamAsync (DeepRec's asynchronous Adam), Adagrad and SGD.
//!
//! ```
//! use hogwild::optim::{AdamAsync, AdamAsyncState};
//!
//! // A [3, 2] embedding table; one sparse step on rows 2 and 0 (rows of grad in that order).
//! let opt = AdamAsync::new(0.001f32, 0.9, 0.999, 1e-8);
//! let mut table = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let mut state = AdamAsyncState::new(table.len(), &opt);
//! opt.apply_sparse(&mut table, &mut state, &[0.1, 0.1, 0.2, 0.2], &[2i64, 0], 2)?;
//! assert_eq!(&table[2..4], &[3.0, 4.0]); // lazy: row 1 is untouched
//! assert_eq!(state.beta1_power, 0.9f32 * 0.9); // the powers advance once per call
//!
//! let err = opt.apply_sparse(&mut table, &mut state, &[0.1, 0.1], &[3i64], 2).unwrap_err();
//! assert_eq!(err.to_string(), "Index 3 at offset 0 in indices is out of range");
//! # Ok::<(), hogwild::Error>(())
//! ```
//!
//! # What is guaranteed
//!
//! - **One arithmetic, identical bits.** Each rule is written once, per element
//!   ([`adam_async_element`], [`rmsprop_element`], the [`Optimizer`] impls). The slice kernels
//!   ([`AdamAsync::apply_dense`], [`AdamAsync::apply_sparse`], [`AdamCoeffs::apply_dense_chunk`],
//!   [`AdamCoeffs::apply_sparse_rows`]: what the TF plugin calls), the generic [`apply_dense`] /
//!   [`apply_sparse`] and the Hogwild store's shared rows all run it in the same operation order,
//!   so they give the same bits for the same inputs. Every AdamAsync kernel (slices, shared
//!   cells, mixed precision) runs one loop through one dispatch, compiled for AVX2 and AVX-512F
//!   as well and picked at run time; Rust never fuses a multiply and an add, and +, -, *, /
//!   and sqrt are correctly rounded everywhere, so the result does not depend on the CPU either.
//!   A sparse update that names every row once equals the dense update bit for bit, and a dense
//!   update split into shards equals the whole.
//! - **ndarray views** of any dimension and layout: [`AdamAsync::apply_dense_view`],
//!   [`AdamAsync::apply_sparse_view`] (a `[rows, dim]` table), [`AdamCoeffs::apply_dense_view`],
//!   [`AdamCoeffs::apply_sparse_rows_view`], [`apply_dense_view`] and [`apply_sparse_view`] give
//!   their slice twins' bits: contiguous row-major views go through the slice kernels, others
//!   through the same element rule. Shapes must match exactly.
//! - **Duplicate indices apply sequentially**, in order, each seeing the state the previous one
//!   left, with the call's coefficients computed once (DeepRec races instead). For the summed
//!   (aggregated-gradient) semantics of DeepRec's Python optimizer call
//!   [`sum_duplicate_indices`] first.
//! - **Lazy sparse updates**: rows not named are left bit-identical (weights and slots); AdamAsync's
//!   powers advance once per call, never for a call with no indices, never on the RMSProp path.
//! - **Validated before written**: hyper-parameters, powers, shapes and every index are checked
//!   before any element changes; a bad input returns a [`crate::Error`] naming it, never a
//!   panic. Gradients are not checked (a NaN gradient gives NaN weights, as in TensorFlow).
//! - **Shared memory without data races.** [`AdamCoeffs::apply_dense_shared`] and
//!   [`AdamCoeffs::apply_sparse_rows_shared`] run the same loops on slices of atomic cells
//!   ([`SharedReal::Cell`]) that other threads may update at once (what the TF plugin runs when it
//!   holds no exclusive lock), with the slice kernels' bits when nothing else writes; the powers
//!   advance with a compare-and-swap loop ([`advance_powers_shared`]).
//! - Generic over f32, f64 and the `half` crate's f16 and bf16 (every operation rounds to the half
//!   type, as TensorFlow's Eigen half does); indices i32, i64, u32, u64, usize.
//! - **Mixed precision** for half variables: [`AdamCoeffs::apply_dense_mixed`] and its sparse and
//!   shared twins keep m, v, the powers and the hyper-parameters in f32, compute in f32 and round
//!   the weight to the half type once (bf16 rounds Adam's default `beta2 = 0.999` to 1; see
//!   [`Widen`]).

mod adam_async;
mod kernel;
mod mixed;
mod real;
mod rule;
mod schedule;
mod shared;
mod views;

pub use adam_async::{
    adam_async_element, advance_powers, rmsprop_element, AdamAsync, AdamAsyncState, AdamCoeffs,
    AdamRule,
};
pub use mixed::Widen;
pub use real::{AdagradRun, Real, SparseIndex};
pub use rule::{apply_dense, apply_sparse, Adagrad, Optimizer, Sgd, SlotState};
pub use schedule::LinearDecay;
pub use shared::advance_powers_shared;
// The shared kernels' cells live with the store's, in one module (`store/atomic.rs`); they are
// named here too because the kernels' callers (the TF plugin) know them by this path.
pub use crate::store::{
    as_cells, cells_from_raw_parts, AtomicBF16, AtomicF16, AtomicF64, SharedReal,
};
pub use views::{apply_dense_view, apply_sparse_view};

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
            index: index.as_i128(),
            offset,
            rows,
        }),
    }
}

/// Bytes of each table's rows that the sparse kernels prefetch at once ([`prefetch_rows`]).
const BATCH_BYTES: usize = 8 << 10;
/// Most rows per batch of [`prefetch_rows`].
const BATCH_ROWS: usize = 32;

/// One of the three tables (var, m, v) a kernel updates, for checking and prefetching: where it
/// starts, how many elements it holds and how many bytes an element takes (var may be narrower
/// than m and v).
#[derive(Clone, Copy)]
pub(crate) struct RowTable {
    start: *const u8,
    pub(crate) len: usize,
    element_bytes: usize,
}

impl RowTable {
    #[inline(always)]
    pub(crate) fn of<E>(table: &[E]) -> Self {
        Self {
            start: table.as_ptr().cast(),
            len: table.len(),
            element_bytes: std::mem::size_of::<E>(),
        }
    }

    /// var (of `V`), m and v (of `M`).
    #[inline(always)]
    pub(crate) fn three<V, M>(var: &[V], m: &[M], v: &[M]) -> [Self; 3] {
        [Self::of(var), Self::of(m), Self::of(v)]
    }
}

/// How many rows of `row_len` elements the sparse kernels take per batch: as many as fit in
/// [`BATCH_BYTES`] of the widest table, at least 1 and at most [`BATCH_ROWS`].
#[inline(always)]
fn batch_rows(row_len: usize, tables: &[RowTable; 3]) -> usize {
    let widest = tables.iter().map(|t| t.element_bytes).max().unwrap_or(1);
    (BATCH_BYTES / (row_len * widest).max(1)).clamp(1, BATCH_ROWS)
}

/// Asks for every cache line of the rows that `batch` names in the three `tables` (var, m, v, each
/// `rows` rows of `row_len` elements), before the sparse kernels update the first of them
/// ([`prefetch_l2`]); an index out of range is skipped (the kernels validate all first).
///
/// Why: random rows of a table much larger than the caches each cost a cache miss and, with
/// 4 KiB pages, a TLB miss. A row loop keeps only the few rows its reorder window covers in
/// flight; asking for a whole batch at once keeps many, and measured faster than both no
/// prefetching and prefetching a fixed number of rows ahead (docs/benchmarks.md, "Optimizers").
#[inline(always)]
fn prefetch_rows<I: SparseIndex>(batch: &[I], rows: usize, row_len: usize, tables: &[RowTable; 3]) {
    for &index in batch {
        if let Some(row) = index.to_row().filter(|&row| row < rows) {
            for t in tables {
                let row_bytes = row_len * t.element_bytes;
                prefetch_l2(t.start.wrapping_add(row * row_bytes), row_bytes);
            }
        }
    }
}

/// Asks the processor to bring the cache lines of the `len` elements at `first` into its L2 cache
/// (`prefetcht1`; a no-op off x86-64 and under Miri, which does not model caches). A hint only: it
/// reads and writes nothing, so `first` may point into memory other threads are writing, and
/// need not even be valid (it is computed with `wrapping_add`).
///
/// L2 rather than L1 (`prefetcht0`): the random-row kernels measured faster with it, presumably
/// because a batch of requests to L1 overflows its few miss buffers.
#[inline(always)]
pub(crate) fn prefetch_l2<E>(first: *const E, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        let bytes = len * std::mem::size_of::<E>();
        if bytes == 0 {
            return;
        }
        let start = first.cast::<u8>();
        // From the line holding the first byte to the line holding the last.
        let skew = start as usize & 63;
        let mut offset = 0;
        while offset < skew + bytes {
            // SAFETY: `_mm_prefetch` is a hint that never faults and neither reads nor writes
            // memory in the language's sense (it changes no value and cannot race), whatever the
            // address; SSE, its only requirement, is part of the x86-64 baseline.
            unsafe {
                _mm_prefetch::<_MM_HINT_T1>(start.wrapping_sub(skew).wrapping_add(offset).cast())
            };
            offset += 64;
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = (first, len);
}

/// Walks a sparse update validated by [`check_sparse`] in batches of [`batch_rows`] rows: asks
/// for each batch's rows in the three `tables` (var, m, v; [`prefetch_rows`]), then calls
/// `f(range, grad_row)` for each index in order, `range` being the index's row in var, m and v.
/// Every sparse kernel (slices, shared cells, mixed precision) walks its rows here.
#[inline(always)]
pub(crate) fn for_each_row<I: SparseIndex, G>(
    indices: &[I],
    grad: &[G],
    rows: usize,
    row_len: usize,
    tables: [RowTable; 3],
    mut f: impl FnMut(Range<usize>, &[G]),
) -> Result<()> {
    let batch = batch_rows(row_len, &tables);
    // `row_len` is positive (`check_sparse`), so the chunk lengths are.
    let grads = grad.chunks(batch * row_len);
    for (b, (chunk, grad)) in indices.chunks(batch).zip(grads).enumerate() {
        prefetch_rows(chunk, rows, row_len, &tables);
        for (k, (&index, g)) in chunk.iter().zip(grad.chunks_exact(row_len)).enumerate() {
            // Already validated by `check_sparse`; an error here is impossible, not a fallback.
            f(row_range(index, b * batch + k, rows, row_len)?, g);
        }
    }
    Ok(())
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
