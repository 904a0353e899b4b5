//! The one AdamAsync loop and the one dispatch behind every kernel, whatever holds the tensors:
//! slices of the compute type (`adam_async.rs`), shared atomic cells (`shared.rs`), or half
//! variables with f32 moments (`mixed.rs`).
//!
//! A kernel is a storage ([`Tables`]: how a run of var, m and v elements reaches [`rule_body`]
//! as plain values, and back) in one of two shapes: [`Dense`], every element, or [`Sparse`], the
//! rows that indices name, prefetched in batches ([`for_each_row`]). [`run`] turns the call's
//! [`AdamRule`] into a constant and picks the code for the processor once per call: the whole
//! kernel (copies, conversions and the rule) compiled for AVX-512F, AVX2 or the build target, with
//! the 16-byte line copies the processor allows ([`line_copy`]). Every instantiation runs the same
//! element code ([`rule_element`]), and Rust never contracts a multiply and an add into an FMA, so
//! every storage and every processor gives the same bits.

use std::ops::Range;

use super::{
    adam_async_element, check_same_len, check_sparse, for_each_row, rmsprop_element, AdamCoeffs,
    AdamRule, Real, RowTable, SparseIndex,
};
use crate::store::{line_copy, ByCell, LineCopy, Lines};
use crate::Result;

pub(super) const RULE_ADAM: u8 = 0;
pub(super) const RULE_NESTEROV: u8 = 1;
pub(super) const RULE_RMSPROP: u8 = 2;

/// The rule `RULE` (an [`AdamRule`] as `u8`) for one element. `RULE` is a constant: the branch
/// is resolved at compile time.
#[inline(always)]
pub(super) fn rule_element<T: Real, const RULE: u8>(
    w: &mut T,
    m: &mut T,
    v: &mut T,
    g: T,
    c: &AdamCoeffs<T>,
) {
    if RULE == RULE_RMSPROP {
        rmsprop_element(w, m, v, g, c);
    } else if RULE == RULE_NESTEROV {
        adam_async_element::<T, true>(w, m, v, g, c);
    } else {
        adam_async_element::<T, false>(w, m, v, g, c);
    }
}

/// The rule `RULE` over zipped slices (the shortest length wins): the one loop every storage
/// runs, on its own elements or on local copies of them. Plain element loops with no bounds
/// checks and no per-element branches, which the compiler vectorises.
#[inline(always)]
pub(super) fn rule_body<T: Real, const RULE: u8>(
    c: &AdamCoeffs<T>,
    var: &mut [T],
    m: &mut [T],
    v: &mut [T],
    grad: &[T],
) {
    let elements = var.iter_mut().zip(m).zip(v).zip(grad);
    for (((w, m), v), &g) in elements {
        rule_element::<T, RULE>(w, m, v, g, c);
    }
}

/// Where a kernel's var, m and v live (computed in `C`), and how the rule reaches them.
pub(super) trait Tables<C: Real> {
    /// What the gradient is stored as (var's element: a value or a cell).
    type Grad;

    /// var, m and v, for checking and prefetching.
    fn row_tables(&self) -> [RowTable; 3];

    /// Runs rule `RULE` ([`rule_body`]) on elements `range` of var, m and v with `grad` (as long
    /// as `range`), copying cells a line at a time with `L` where the storage copies lines.
    fn run<const RULE: u8, L: LineCopy>(
        &mut self,
        c: &AdamCoeffs<C>,
        range: Range<usize>,
        grad: &[Self::Grad],
    );
}

/// A kernel's work for [`run`]: rule `RULE` on its tables, with line copies `L`.
pub(super) trait Work<C: Real> {
    /// What the kernel returns.
    type Out;
    fn run<const RULE: u8, L: LineCopy>(self, c: &AdamCoeffs<C>) -> Self::Out;
}

/// A dense update: every element of var, m and v, with a gradient as long.
pub(super) struct Dense<'g, X: Tables<C>, C: Real> {
    tables: X,
    grad: &'g [X::Grad],
}

impl<'g, X: Tables<C>, C: Real> Dense<'g, X, C> {
    /// Checks that var, m, v and grad have one length, not zero.
    pub(super) fn new(tables: X, grad: &'g [X::Grad]) -> Result<Self> {
        let [var, m, v] = tables.row_tables().map(|t| t.len);
        check_same_len(&["var", "m", "v", "grad"], &[var, m, v, grad.len()])?;
        Ok(Self { tables, grad })
    }
}

impl<X: Tables<C>, C: Real> Work<C> for Dense<'_, X, C> {
    type Out = ();

    #[inline(always)]
    fn run<const RULE: u8, L: LineCopy>(mut self, c: &AdamCoeffs<C>) {
        let n = self.grad.len();
        self.tables.run::<RULE, L>(c, 0..n, self.grad);
    }
}

/// A sparse update, validated: `grad` holds one `row_len` row per index, and every index names
/// one of `rows` rows of var, m and v.
pub(super) struct Sparse<'g, X: Tables<C>, C: Real, I> {
    tables: X,
    grad: &'g [X::Grad],
    indices: &'g [I],
    row_len: usize,
    rows: usize,
}

impl<'g, X: Tables<C>, C: Real, I: SparseIndex> Sparse<'g, X, C, I> {
    /// Checks that var, m and v have one length, not zero, and the indices and grad against it
    /// ([`check_sparse`]: every index before anything is written).
    pub(super) fn new(
        tables: X,
        grad: &'g [X::Grad],
        indices: &'g [I],
        row_len: usize,
    ) -> Result<Self> {
        let [var, m, v] = tables.row_tables().map(|t| t.len);
        check_same_len(&["var", "m", "v"], &[var, m, v])?;
        let rows = check_sparse(var, row_len, grad, indices)?;
        Ok(Self {
            tables,
            grad,
            indices,
            row_len,
            rows,
        })
    }
}

impl<X: Tables<C>, C: Real, I: SparseIndex> Work<C> for Sparse<'_, X, C, I> {
    type Out = Result<()>;

    #[inline(always)]
    fn run<const RULE: u8, L: LineCopy>(mut self, c: &AdamCoeffs<C>) -> Result<()> {
        let tables = self.tables.row_tables();
        let t = &mut self.tables;
        for_each_row(
            self.indices,
            self.grad,
            self.rows,
            self.row_len,
            tables,
            |range, g| t.run::<RULE, L>(c, range, g),
        )
    }
}

/// Runs `work` with `rule`, compiled for the widest instruction set the processor has.
#[inline(always)]
pub(super) fn run<C: Real, W: Work<C>>(c: &AdamCoeffs<C>, rule: AdamRule, work: W) -> W::Out {
    match rule {
        AdamRule::Adam => cpu::by_cpu::<C, W, RULE_ADAM>(c, work),
        AdamRule::Nesterov => cpu::by_cpu::<C, W, RULE_NESTEROV>(c, work),
        AdamRule::RmsProp => cpu::by_cpu::<C, W, RULE_RMSPROP>(c, work),
    }
}

/// The compiled copies of a kernel and the choice between them.
pub(super) mod cpu {
    use super::*;

    /// `work` compiled for AVX-512F, AVX2 or the build target, with the line copies to match
    /// ([`line_copy`]: AVX is required for any).
    #[inline(always)]
    pub(in super::super) fn by_cpu<C: Real, W: Work<C>, const RULE: u8>(
        c: &AdamCoeffs<C>,
        work: W,
    ) -> W::Out {
        match line_copy() {
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: `line_copy` found AVX-512F and AVX, all `avx512` needs.
            Lines::Avx512 => unsafe { avx512::<C, W, RULE>(c, work) },
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            // SAFETY: `line_copy` found AVX2 and AVX, all `avx2` needs.
            Lines::Avx2 => unsafe { avx2::<C, W, RULE>(c, work) },
            #[cfg(all(target_arch = "x86_64", not(miri)))]
            Lines::Sse => portable::<C, W, RULE, crate::store::Sse>(c, work),
            Lines::ByCell => portable::<C, W, RULE, ByCell>(c, work),
        }
    }

    /// The kernel for the compile-time target (SSE2 on plain x86-64).
    pub(in super::super) fn portable<C: Real, W: Work<C>, const RULE: u8, L: LineCopy>(
        c: &AdamCoeffs<C>,
        work: W,
    ) -> W::Out {
        work.run::<RULE, L>(c)
    }

    /// The kernel compiled for AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2 and AVX.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    #[target_feature(enable = "avx2")]
    pub(in super::super) unsafe fn avx2<C: Real, W: Work<C>, const RULE: u8>(
        c: &AdamCoeffs<C>,
        work: W,
    ) -> W::Out {
        work.run::<RULE, crate::store::Avx>(c)
    }

    /// The kernel compiled for AVX-512F.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) unsafe fn avx512<C: Real, W: Work<C>, const RULE: u8>(
        c: &AdamCoeffs<C>,
        work: W,
    ) -> W::Out {
        work.run::<RULE, crate::store::Avx512>(c)
    }
}

/// Slices of the compute type, updated in place: the slice kernels
/// ([`AdamCoeffs::apply_dense_chunk`], [`AdamCoeffs::apply_sparse_rows`]).
pub(super) struct Slices<'a, T> {
    pub(super) var: &'a mut [T],
    pub(super) m: &'a mut [T],
    pub(super) v: &'a mut [T],
}

impl<T: Real> Tables<T> for Slices<'_, T> {
    type Grad = T;

    #[inline(always)]
    fn row_tables(&self) -> [RowTable; 3] {
        RowTable::three(self.var, self.m, self.v)
    }

    #[inline(always)]
    fn run<const RULE: u8, L: LineCopy>(&mut self, c: &AdamCoeffs<T>, r: Range<usize>, g: &[T]) {
        // In bounds: `r` ends at most at the common length of the slices (`Dense`, `Sparse`).
        let (w, m, v) = (
            &mut self.var[r.clone()],
            &mut self.m[r.clone()],
            &mut self.v[r],
        );
        rule_body::<T, RULE>(c, w, m, v, g);
    }
}
