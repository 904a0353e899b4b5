//! The optimizers on ndarray views: a Rust user trains `Array`s directly, of any dimension.
//!
//! Each entry point is its slice version's twin and gives the same bits: contiguous views in
//! standard (row-major) layout go through the slice kernels themselves; any other layout
//! (transposed, sliced with a step, column-major) runs the same element rule on each element, so
//! it gives the bits the slice kernel would give on a contiguous copy. Shapes must match
//! exactly (a `[2, 3]` gradient does not fit a `[3, 2]` variable even though the lengths
//! agree); a mismatch is an error naming both shapes, checked with everything else before any
//! element is written.
//!
//! State kept in vectors ([`AdamAsyncState`], [`SlotState`]) holds the variable's elements in
//! its logical row-major order, whatever the view's memory layout.
//!
//! ```
//! use hogwild::optim::{AdamAsync, AdamAsyncState};
//! use ndarray::{array, Array2};
//!
//! let opt = AdamAsync::new(0.001f32, 0.9, 0.999, 1e-8);
//! let mut table: Array2<f32> = array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
//! let mut state = AdamAsyncState::new(table.len(), &opt);
//!
//! // A dense step: grad has the table's shape.
//! opt.apply_dense_view(table.view_mut(), &mut state, Array2::from_elem((3, 2), 0.1).view())?;
//! // A sparse step on rows 2 and 0: one gradient row per index, as wide as the table.
//! let grad = array![[0.1f32, 0.1], [0.2, 0.2]];
//! opt.apply_sparse_view(table.view_mut(), &mut state, grad.view(), &[2i64, 0])?;
//! assert_eq!(state.beta1_power, 0.9f32 * 0.9 * 0.9);
//!
//! // The same steps on a plain slice give the same bits.
//! let mut flat = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let mut flat_state = AdamAsyncState::new(flat.len(), &opt);
//! opt.apply_dense(&mut flat, &mut flat_state, &[0.1; 6])?;
//! opt.apply_sparse(&mut flat, &mut flat_state, &[0.1, 0.1, 0.2, 0.2], &[2i64, 0], 2)?;
//! assert_eq!(table.as_slice().unwrap(), &flat[..]);
//!
//! // A gradient of another shape is an error, and nothing is written.
//! let err = opt
//!     .apply_dense_view(table.view_mut(), &mut state, Array2::zeros((2, 3)).view())
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "shape mismatch: grad vs var: expected [3, 2], got [2, 3]");
//! # Ok::<(), hogwild::Error>(())
//! ```

use ndarray::{ArrayView, ArrayView2, ArrayViewMut, ArrayViewMut2, Dimension, Zip};

use super::rule::{check_state, run_elements};
use super::{
    adam_async_element, apply_dense, apply_sparse, rmsprop_element, row_range, AdamAsync,
    AdamAsyncState, AdamCoeffs, AdamRule, Optimizer, Real, SlotState, SparseIndex,
};
use crate::{Error, Result};

/// Checks that `other` (named `what`) has the shape of `var`.
fn check_shape(what: &str, var: &[usize], other: &[usize]) -> Result<()> {
    if var == other {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            what: format!("{what} vs var"),
            expected: format!("{var:?}"),
            got: format!("{other:?}"),
        })
    }
}

/// Checks a sparse update on a `[rows, row_len]` view: `grad` is `[indices.len(), row_len]` and
/// every index names a row.
fn check_sparse_view<I: SparseIndex>(var: &[usize], grad: &[usize], indices: &[I]) -> Result<()> {
    let (rows, row_len) = (var[0], var[1]);
    if rows == 0 || row_len == 0 {
        return Err(Error::Empty { what: "var" });
    }
    if grad != [indices.len(), row_len] {
        return Err(Error::ShapeMismatch {
            what: "grad must be one row per index".into(),
            expected: format!("[{}, {row_len}]", indices.len()),
            got: format!("{grad:?}"),
        });
    }
    for (offset, &index) in indices.iter().enumerate() {
        row_range(index, offset, rows, row_len)?;
    }
    Ok(())
}

/// The moments of `state` as views of `shape`, or the error naming the one that does not fit.
fn moment_views<'a, T, D: Dimension>(
    shape: D,
    m: &'a mut [T],
    v: &'a mut [T],
) -> Result<(ArrayViewMut<'a, T, D>, ArrayViewMut<'a, T, D>)> {
    let view = |what: &str, xs: &'a mut [T]| {
        let len = xs.len();
        ArrayViewMut::from_shape(shape.clone(), xs).map_err(|_| Error::ShapeMismatch {
            what: format!("optimizer state {what} vs var"),
            expected: format!("{} elements", shape.size()),
            got: len.to_string(),
        })
    };
    Ok((view("m", m)?, view("v", v)?))
}

/// The rule on every element of four views of one shape, in whatever order ndarray finds fastest:
/// elements are independent, so the order does not change a bit.
fn zip_rule<T: Real, D: Dimension>(
    c: &AdamCoeffs<T>,
    rule: AdamRule,
    var: ArrayViewMut<'_, T, D>,
    m: ArrayViewMut<'_, T, D>,
    v: ArrayViewMut<'_, T, D>,
    grad: ArrayView<'_, T, D>,
) {
    let zip = Zip::from(var).and(m).and(v).and(grad);
    match rule {
        AdamRule::Adam => zip.for_each(|w, m, v, &g| adam_async_element::<T, false>(w, m, v, g, c)),
        AdamRule::Nesterov => {
            zip.for_each(|w, m, v, &g| adam_async_element::<T, true>(w, m, v, g, c))
        }
        AdamRule::RmsProp => zip.for_each(|w, m, v, &g| rmsprop_element(w, m, v, g, c)),
    }
}

impl<T: Real> AdamCoeffs<T> {
    /// [`AdamCoeffs::apply_dense_chunk`] on views: `var`, `m`, `v` and `grad` of one shape, any
    /// dimension and layout (no power update).
    pub fn apply_dense_view<D: Dimension>(
        &self,
        mut var: ArrayViewMut<'_, T, D>,
        mut m: ArrayViewMut<'_, T, D>,
        mut v: ArrayViewMut<'_, T, D>,
        grad: ArrayView<'_, T, D>,
        use_nesterov: bool,
    ) -> Result<()> {
        check_shape("m", var.shape(), m.shape())?;
        check_shape("v", var.shape(), v.shape())?;
        check_shape("grad", var.shape(), grad.shape())?;
        if var.is_empty() {
            return Err(Error::Empty { what: "var" });
        }
        // Equal shapes and equal strides: the i-th element in memory of each is the same logical
        // element, so the slice kernel can run on the memory (standard or column-major order).
        let same_layout = [m.strides(), v.strides(), grad.strides()]
            .iter()
            .all(|s| *s == var.strides());
        if same_layout {
            if let (Some(w), Some(m), Some(v), Some(g)) = (
                var.as_slice_memory_order_mut(),
                m.as_slice_memory_order_mut(),
                v.as_slice_memory_order_mut(),
                grad.as_slice_memory_order(),
            ) {
                return self.apply_dense_chunk(w, m, v, g, use_nesterov);
            }
        }
        zip_rule(self, AdamRule::dense(use_nesterov), var, m, v, grad);
        Ok(())
    }

    /// [`AdamCoeffs::apply_sparse_rows`] on views: `var`, `m` and `v` are `[rows, row_len]`,
    /// `grad` is `[indices.len(), row_len]`; any layout (no power update).
    pub fn apply_sparse_rows_view<I: SparseIndex>(
        &self,
        mut var: ArrayViewMut2<'_, T>,
        mut m: ArrayViewMut2<'_, T>,
        mut v: ArrayViewMut2<'_, T>,
        grad: ArrayView2<'_, T>,
        indices: &[I],
        rmsprop: bool,
    ) -> Result<()> {
        check_shape("m", var.shape(), m.shape())?;
        check_shape("v", var.shape(), v.shape())?;
        check_sparse_view(var.shape(), grad.shape(), indices)?;
        let row_len = var.ncols();
        if let (Some(w), Some(m), Some(v), Some(g)) = (
            var.as_slice_mut(),
            m.as_slice_mut(),
            v.as_slice_mut(),
            grad.as_slice(),
        ) {
            return self.apply_sparse_rows(w, m, v, g, indices, row_len, rmsprop);
        }
        let rule = AdamRule::sparse(rmsprop);
        // Rows in order, so that a duplicate index applies again to the state the previous one
        // left, as in the slice kernel. In range: `check_sparse_view` checked every index.
        for (offset, &index) in indices.iter().enumerate() {
            let r = row_range(index, offset, var.nrows(), 1)?.start;
            zip_rule(
                self,
                rule,
                var.row_mut(r),
                m.row_mut(r),
                v.row_mut(r),
                grad.row(offset),
            );
        }
        Ok(())
    }
}

impl<T: Real> AdamAsync<T> {
    /// [`AdamAsync::apply_dense`] on views of any dimension and layout: `grad` has `var`'s shape;
    /// `state` holds `var.len()` moments in `var`'s logical (row-major) order.
    pub fn apply_dense_view<D: Dimension>(
        &self,
        var: ArrayViewMut<'_, T, D>,
        state: &mut AdamAsyncState<T>,
        grad: ArrayView<'_, T, D>,
    ) -> Result<()> {
        self.dense_step(state, |c, m, v| {
            let (m, v) = moment_views(var.raw_dim(), m, v)?;
            c.apply_dense_view(var, m, v, grad, self.use_nesterov)
        })
    }

    /// [`AdamAsync::apply_sparse`] on a `[rows, row_len]` view: `grad` is
    /// `[indices.len(), row_len]`; `state` holds `var.len()` moments in `var`'s row-major order.
    pub fn apply_sparse_view<I: SparseIndex>(
        &self,
        var: ArrayViewMut2<'_, T>,
        state: &mut AdamAsyncState<T>,
        grad: ArrayView2<'_, T>,
        indices: &[I],
    ) -> Result<()> {
        self.sparse_step(state, indices.len(), |c, m, v| {
            let (m, v) = moment_views(var.raw_dim(), m, v)?;
            c.apply_sparse_rows_view(var, m, v, grad, indices, self.apply_sparse_rmsprop)
        })
    }
}

/// [`apply_dense`] on views of any dimension and layout: `grad` has `var`'s shape; `state`
/// ([`SlotState::new`] for `var.len()` elements) is in `var`'s logical (row-major) order.
pub fn apply_dense_view<T: Real, O: Optimizer<T>, D: Dimension>(
    opt: &O,
    mut var: ArrayViewMut<'_, T, D>,
    state: &mut SlotState<T>,
    grad: ArrayView<'_, T, D>,
) -> Result<()> {
    check_shape("grad", var.shape(), grad.shape())?;
    if let (Some(w), Some(g)) = (var.as_slice_mut(), grad.as_slice()) {
        return apply_dense(opt, w, state, g);
    }
    if var.is_empty() {
        return Err(Error::Empty { what: "var" });
    }
    check_state::<T, O>(var.len(), state)?;
    let step = opt.begin(&state.scalars, false)?;
    // `iter_mut` and `iter` walk both views in logical order, the state's order. In bounds:
    // `check_state` proved `state.slots.len() == var.len() * SLOTS`.
    run_elements(opt, &step, var.iter_mut(), grad.iter(), &mut state.slots);
    opt.finish(&mut state.scalars, false, var.len());
    Ok(())
}

/// [`apply_sparse`] on a `[rows, row_len]` view: `grad` is `[indices.len(), row_len]`; `state`
/// is in `var`'s row-major order. Rows apply in order (duplicates sequentially).
pub fn apply_sparse_view<T: Real, O: Optimizer<T>, I: SparseIndex>(
    opt: &O,
    mut var: ArrayViewMut2<'_, T>,
    state: &mut SlotState<T>,
    grad: ArrayView2<'_, T>,
    indices: &[I],
) -> Result<()> {
    let row_len = var.ncols();
    check_sparse_view(var.shape(), grad.shape(), indices)?;
    if let (Some(w), Some(g)) = (var.as_slice_mut(), grad.as_slice()) {
        return apply_sparse(opt, w, state, g, indices, row_len);
    }
    check_state::<T, O>(var.len(), state)?;
    let step = opt.begin(&state.scalars, true)?;
    let slots = O::SLOTS;
    for (offset, &index) in indices.iter().enumerate() {
        // Already validated by `check_sparse_view`; an error here is impossible, not a fallback.
        let range = row_range(index, offset, var.nrows(), row_len)?;
        // In bounds: the row ends at most at `var.len()`, and `check_state` proved
        // `state.slots.len() == var.len() * SLOTS`.
        let s = &mut state.slots[range.start * slots..range.end * slots];
        run_elements(
            opt,
            &step,
            var.row_mut(range.start / row_len),
            grad.row(offset),
            s,
        );
    }
    opt.finish(&mut state.scalars, true, indices.len());
    Ok(())
}
