//! Shared-memory AdamAsync kernels: the same element rules on buffers that other threads may read
//! and write at the same time.
//!
//! # Why
//!
//! TensorFlow lets several AdamAsync kernels update one variable at once: ref variables are not
//! locked unless `use_locking`, and sparse updates of resource variables take shared locks. The
//! slice kernels ([`AdamCoeffs::apply_dense_chunk`], [`AdamCoeffs::apply_sparse_rows`]) take
//! `&mut [T]`, a promise of exclusive access; handing them memory that another thread writes is
//! undefined behaviour in Rust, even when every float is loaded and stored whole. The kernels here
//! take slices of atomic cells instead, so two of them running on the same memory is defined
//! behaviour: a load sees some value that was stored, never a torn or invented one.
//!
//! # How
//!
//! Each element is a cell ([`SharedReal::Cell`]): the Hogwild store's atomic floats
//! ([`AtomicF32`], [`AtomicF64`], [`AtomicF16`], [`AtomicBF16`], whose module,
//! `store/atomic.rs`, states the rules). The kernels go through the cells one cache line at a
//! time: they copy a line (64 bytes) of var, m, v and grad into local values, run the slice
//! kernels' element loop on them (the same rules [`adam_async_element`](super::adam_async_element) /
//! [`rmsprop_element`](super::rmsprop_element), through the same dispatch: `optim/kernel.rs`,
//! compiled for AVX-512, AVX2 or the build target and picked per CPU) and copy var, m and v back. On x86-64 with AVX the
//! copies are aligned 16-byte `vmovaps` accesses, each one atomic access that reads or writes
//! every cell it covers whole (`store/bulk.rs`): what a relaxed atomic access per cell does, in a
//! quarter of the instructions or fewer. Elsewhere, under Miri, and for the part of a run before
//! its first 16-byte boundary or after its last whole line (or a whole run whose four buffers do
//! not share their alignment), each cell is copied with a relaxed atomic load or store. With no
//! concurrent writer the results are therefore bit-identical to the slice kernels', for every
//! element type and rule.
//!
//! Why lines: a relaxed atomic access compiles to one scalar move and the compiler may not merge
//! atomics into vector instructions, so copying cell by cell takes about 3.4x the slice kernel's
//! time, on a dense step and on a sparse step over random rows alike (docs/benchmarks.md,
//! "Optimizers"). Line copies cost what the slice kernels cost on a dense step (memory bound
//! either way) and about 1.3x on random sparse rows: a line takes four 16-byte accesses per tensor
//! where the slice kernel makes one 64-byte access, plus the moves that assemble the 64-byte
//! registers, so fewer rows' cache and TLB misses fit in the processor's reorder window. Wider
//! accesses would close the gap, but only 16-byte ones are guaranteed atomic (`store/bulk.rs`).
//!
//! Sparse updates prefetch their rows in batches, as the slice kernels do
//! ([`prefetch_rows`](super::prefetch_rows)).
//!
//! Under concurrency an element's read-modify-write is not atomic as a whole: another kernel's
//! store between this kernel's load and store of a line is overwritten (Hogwild's contract, as in
//! [`crate::store`], and what TensorFlow's unlocked updates do).
//!
//! The beta powers advance with a compare-and-swap loop ([`advance_powers_shared`]): every call
//! multiplies exactly once, even when calls finish together. DeepRec's kernels use a plain load and
//! store, which can lose an advance; here the sequence of stored values is the sequential one
//! (each step stores `p * beta` of the value the previous step stored), so after `n` calls the
//! powers hold the bits of `n` sequential advances, whatever the interleaving.
//!
//! Sparse updates validate every index before writing and apply rows in order, so a duplicate
//! index applies again to the state the previous one stored, as in the slice kernels.
//!
//! [`AtomicF32`]: crate::store::AtomicF32
//! [`AtomicF64`]: crate::store::AtomicF64
//! [`AtomicF16`]: crate::store::AtomicF16
//! [`AtomicBF16`]: crate::store::AtomicBF16

use std::ops::Range;

use super::kernel::{self, rule_body, Dense, Sparse, Tables};
use super::{AdamCoeffs, AdamRule, RowTable, SparseIndex};
use crate::store::{LineCopy, SharedReal};
use crate::Result;

/// `beta1_power *= beta1; beta2_power *= beta2`, each with a compare-and-swap loop: exactly one
/// advance per call, even when calls on the same powers run at once (see the module docs).
pub fn advance_powers_shared<T: SharedReal>(
    beta1_power: &T::Cell,
    beta2_power: &T::Cell,
    beta1: T,
    beta2: T,
) {
    T::update(beta1_power, |p| p * beta1);
    T::update(beta2_power, |p| p * beta2);
}

impl<T: SharedReal> AdamCoeffs<T> {
    /// The dense rule over equal-length, non-empty slices of cells (no power update): the rule of
    /// [`AdamCoeffs::apply_dense_chunk`] on memory other threads may access at the same time.
    /// Shardable: any split of the slices gives the same bits.
    pub fn apply_dense_shared(
        &self,
        var: &[T::Cell],
        m: &[T::Cell],
        v: &[T::Cell],
        grad: &[T::Cell],
        use_nesterov: bool,
    ) -> Result<()> {
        let work = Dense::new(Cells::<T> { var, m, v }, grad)?;
        kernel::run(self, AdamRule::dense(use_nesterov), work);
        Ok(())
    }

    /// The sparse rule on the rows named by `indices` of a `[rows, row_len]` variable of cells
    /// stored row-major (no power update): [`AdamCoeffs::apply_sparse_rows`] on memory other
    /// threads may access at the same time. Every index is validated before anything is written;
    /// rows then apply in order, so a duplicate index applies again to the state the previous one
    /// stored.
    #[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
    pub fn apply_sparse_rows_shared<I: SparseIndex>(
        &self,
        var: &[T::Cell],
        m: &[T::Cell],
        v: &[T::Cell],
        grad: &[T::Cell],
        indices: &[I],
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        let work = Sparse::new(Cells::<T> { var, m, v }, grad, indices, row_len)?;
        kernel::run(self, AdamRule::sparse(rmsprop), work)
    }
}

/// Slices of cells of the compute type, copied a line at a time (see the module docs).
struct Cells<'a, T: SharedReal> {
    var: &'a [T::Cell],
    m: &'a [T::Cell],
    v: &'a [T::Cell],
}

impl<T: SharedReal> Tables<T> for Cells<'_, T> {
    type Grad = T::Cell;

    #[inline(always)]
    fn row_tables(&self) -> [RowTable; 3] {
        RowTable::three(self.var, self.m, self.v)
    }

    #[inline(always)]
    fn run<const RULE: u8, L: LineCopy>(
        &mut self,
        c: &AdamCoeffs<T>,
        r: Range<usize>,
        g: &[T::Cell],
    ) {
        // In bounds: `r` ends at most at the common length of the slices (`Dense`, `Sparse`).
        let (w, m, v) = (&self.var[r.clone()], &self.m[r.clone()], &self.v[r]);
        shared_body::<T, RULE, L>(c, w, m, v, g);
    }
}

/// The rule `RULE` over equal-length slices of cells, a line at a time with `L`'s copies where
/// they apply (see the module docs), cell by cell elsewhere.
#[inline(always)]
fn shared_body<T: SharedReal, const RULE: u8, L: LineCopy>(
    c: &AdamCoeffs<T>,
    var: &[T::Cell],
    m: &[T::Cell],
    v: &[T::Cell],
    grad: &[T::Cell],
) {
    let n = var.len().min(m.len()).min(v.len()).min(grad.len());
    let per_line = std::mem::size_of::<T::Line>() / std::mem::size_of::<T>();
    let mut done = 0;
    let skew = |cells: &[T::Cell]| cells.as_ptr() as usize % 16;
    if L::LINES && [m, v, grad].iter().all(|x| skew(x) == skew(var)) {
        // Cells before the first 16-byte boundary (cells are aligned to their size, so this is
        // a whole number of cells).
        let head = ((16 - skew(var)) % 16 / std::mem::size_of::<T>()).min(n);
        if head > 0 {
            by_cells::<T, RULE>(c, &var[..head], &m[..head], &v[..head], &grad[..head]);
        }
        let lines = (n - head) / per_line;
        let r = head..head + lines * per_line;
        let (var_l, m_l, v_l, grad_l) = (
            &var[r.clone()],
            &m[r.clone()],
            &v[r.clone()],
            &grad[r.clone()],
        );
        let all = var_l
            .chunks_exact(per_line)
            .zip(m_l.chunks_exact(per_line))
            .zip(v_l.chunks_exact(per_line))
            .zip(grad_l.chunks_exact(per_line));
        for (((var, m), v), grad) in all {
            // SAFETY: every slice is one line long and starts on a 16-byte boundary (`head`
            // reached it in `var`, the others share its alignment, and `per_line` cells are 64
            // bytes); the caller picked `L` for this processor (`line_copy`).
            let (g, mut m_line, mut v_line, mut w) = unsafe {
                (
                    L::load::<T>(grad),
                    L::load::<T>(m),
                    L::load::<T>(v),
                    L::load::<T>(var),
                )
            };
            rule_body::<T, RULE>(c, w.as_mut(), m_line.as_mut(), v_line.as_mut(), g.as_ref());
            // SAFETY: as for the loads.
            unsafe {
                L::store::<T>(var, &w);
                L::store::<T>(m, &m_line);
                L::store::<T>(v, &v_line);
            }
        }
        done = r.end;
    }
    while done < n {
        let r = done..n.min(done + per_line);
        done = r.end;
        by_cells::<T, RULE>(c, &var[r.clone()], &m[r.clone()], &v[r.clone()], &grad[r]);
    }
}

/// The rule `RULE` over at most a line of cells, copied one relaxed atomic access per cell.
#[inline(always)]
fn by_cells<T: SharedReal, const RULE: u8>(
    c: &AdamCoeffs<T>,
    var: &[T::Cell],
    m: &[T::Cell],
    v: &[T::Cell],
    grad: &[T::Cell],
) {
    let k = var.len();
    let (mut w, mut m_line, mut v_line, mut g) =
        (T::ZERO_LINE, T::ZERO_LINE, T::ZERO_LINE, T::ZERO_LINE);
    let (w_buf, m_buf) = (&mut w.as_mut()[..k], &mut m_line.as_mut()[..k]);
    let (v_buf, g_buf) = (&mut v_line.as_mut()[..k], &mut g.as_mut()[..k]);
    load(var, w_buf);
    load(m, m_buf);
    load(v, v_buf);
    load(grad, g_buf);
    rule_body::<T, RULE>(c, w_buf, m_buf, v_buf, g_buf);
    store(var, w_buf);
    store(m, m_buf);
    store(v, v_buf);
}

/// Copies `cells` into `out`, one relaxed atomic load each (also the mixed kernels' copy).
#[inline(always)]
pub(super) fn load<T: SharedReal>(cells: &[T::Cell], out: &mut [T]) {
    for (x, cell) in out.iter_mut().zip(cells) {
        *x = T::load(cell);
    }
}

/// Copies `values` into `cells`, one relaxed atomic store each (also the mixed kernels' copy).
#[inline(always)]
pub(super) fn store<T: SharedReal>(cells: &[T::Cell], values: &[T]) {
    for (cell, &x) in cells.iter().zip(values) {
        T::store(cell, x);
    }
}

#[cfg(test)]
mod tests {
    //! The shared kernels give the slice kernels' bits for every element type and rule, survive
    //! threads updating the same cells, and validate before writing. Run under Miri by `make miri`
    //! (`cargo +nightly miri test -p hogwild-train --lib optim::shared`).

    use half::{bf16, f16};

    use super::*;
    use crate::optim::Real;
    use crate::rng::test_values as values;
    use crate::store::AtomicF32;

    fn cells<T: SharedReal>(xs: &[T]) -> Vec<T::Cell> {
        xs.iter().map(|&x| T::cell(x)).collect()
    }

    fn loaded<T: SharedReal>(cells: &[T::Cell]) -> Vec<T> {
        cells.iter().map(T::load).collect()
    }

    fn bits<T: Real>(xs: &[T]) -> Vec<u64> {
        xs.iter().map(|x| x.to_f64_lossy().to_bits()).collect()
    }

    fn coeffs<T: Real>() -> AdamCoeffs<T> {
        let t = |x: f64| T::from(x).unwrap();
        AdamCoeffs::new(t(0.01), t(0.9), t(0.99), t(1e-3), t(0.729), t(0.970299)).unwrap()
    }

    fn rmsprop_coeffs<T: Real>() -> AdamCoeffs<T> {
        let t = |x: f64| T::from(x).unwrap();
        AdamCoeffs::new_rmsprop(t(0.01), t(0.9), t(0.99), t(1e-3)).unwrap()
    }

    /// Elements per line (64 bytes) of `T`.
    fn per_line<T: SharedReal>() -> usize {
        std::mem::size_of::<T::Line>() / std::mem::size_of::<T>()
    }

    /// Cells holding `xs` that start `skew` elements past a 64-byte boundary: with equal skews
    /// the kernels take the line path from the first 16-byte boundary on (where the processor
    /// allows), with unequal ones the cell-by-cell path.
    struct Placed<T: SharedReal> {
        buf: Vec<T::Cell>,
        start: usize,
        len: usize,
    }

    impl<T: SharedReal> Placed<T> {
        fn new(xs: &[T], skew: usize) -> Self {
            let size = std::mem::size_of::<T>();
            let mut buf: Vec<T::Cell> = (0..xs.len() + 2 * per_line::<T>())
                .map(|_| T::cell(T::zero()))
                .collect();
            let start = (64 - buf.as_ptr() as usize % 64) % 64 / size + skew;
            for (cell, &x) in buf[start..].iter_mut().zip(xs) {
                *cell = T::cell(x);
            }
            Self {
                buf,
                start,
                len: xs.len(),
            }
        }

        fn cells(&self) -> &[T::Cell] {
            &self.buf[self.start..self.start + self.len]
        }

        fn values(&self) -> Vec<T> {
            loaded::<T>(self.cells())
        }
    }

    /// Lengths around the line size: the heads, tails and line boundaries (fewer under Miri,
    /// which interprets every element).
    fn lengths<T: SharedReal>() -> Vec<usize> {
        let l = per_line::<T>();
        if cfg!(miri) {
            vec![1, 7, l + 3]
        } else {
            vec![1, 7, l - 1, l, l + 1, 2 * l + 5, 9 * l + 3]
        }
    }

    /// Skews (in elements) of var, m, v and grad: equal ones at several offsets from a line
    /// boundary, and unequal ones.
    fn skews<T: SharedReal>() -> Vec<[usize; 4]> {
        let quarter = 16 / std::mem::size_of::<T>();
        let mut all = vec![[0; 4], [1; 4], [quarter; 4], [quarter + 1; 4], [0, 0, 0, 1]];
        if cfg!(miri) {
            all.truncate(2);
        }
        all
    }

    fn dense_matches_slices<T: SharedReal>(name: &str) {
        let c = coeffs::<T>();
        for n in lengths::<T>() {
            for skew in skews::<T>() {
                for nesterov in [false, true] {
                    let seed = n as u64;
                    let var0 = values::<T>(seed, n, 4.0, false);
                    let m0 = values::<T>(seed + 1, n, 0.2, false);
                    let v0 = values::<T>(seed + 2, n, 0.05, true);
                    let g = values::<T>(seed + 3, n, 1.0, false);
                    let (mut w, mut m, mut v) = (var0.clone(), m0.clone(), v0.clone());
                    c.apply_dense_chunk(&mut w, &mut m, &mut v, &g, nesterov)
                        .unwrap();
                    let sw = Placed::new(&var0, skew[0]);
                    let sm = Placed::new(&m0, skew[1]);
                    let sv = Placed::new(&v0, skew[2]);
                    let sg = Placed::new(&g, skew[3]);
                    c.apply_dense_shared(sw.cells(), sm.cells(), sv.cells(), sg.cells(), nesterov)
                        .unwrap();
                    let what = format!("{name}, n {n}, skews {skew:?}, nesterov {nesterov}");
                    assert_eq!(bits(&sw.values()), bits(&w), "{what}: var");
                    assert_eq!(bits(&sm.values()), bits(&m), "{what}: m");
                    assert_eq!(bits(&sv.values()), bits(&v), "{what}: v");
                    assert_eq!(bits(&sg.values()), bits(&g), "{what}: grad");
                    // Nothing outside the run was written.
                    let zeros = |p: &Placed<T>| {
                        let (before, after) = (&p.buf[..p.start], &p.buf[p.start + p.len..]);
                        loaded::<T>(before)
                            .iter()
                            .chain(&loaded::<T>(after))
                            .all(|x| x.is_zero())
                    };
                    assert!([&sw, &sm, &sv].into_iter().all(zeros), "{what}: outside");
                }
            }
        }
    }

    #[test]
    fn dense_shared_gives_the_slice_kernel_bits_for_every_dtype() {
        dense_matches_slices::<f32>("f32");
        dense_matches_slices::<f64>("f64");
        dense_matches_slices::<f16>("f16");
        dense_matches_slices::<bf16>("bf16");
    }

    fn sparse_matches_slices<T: SharedReal>(name: &str) {
        // Duplicates (row 4 three times, row 0 twice) apply one after the other; the long list
        // spans several prefetch batches.
        let short = vec![4i64, 0, 4, 5, 0, 4];
        let long: Vec<i64> = (0..if cfg!(miri) { 40 } else { 300 })
            .map(|i| [0, 4, 5][(i * 7 + i / 5) % 3])
            .collect();
        let l = per_line::<T>();
        let row_lens: Vec<usize> = if cfg!(miri) {
            vec![1, l + 3]
        } else {
            vec![1, 3, l / 4, l, 19, l + 3, 4 * l]
        };
        for indices in [&short, &long] {
            for &row_len in &row_lens {
                for skew in skews::<T>() {
                    for rmsprop in [false, true] {
                        let c = if rmsprop {
                            rmsprop_coeffs::<T>()
                        } else {
                            coeffs::<T>()
                        };
                        let n = 6 * row_len;
                        let var0 = values::<T>(11, n, 4.0, false);
                        let m0 = values::<T>(12, n, 0.2, false);
                        let v0 = values::<T>(13, n, 0.05, true);
                        let g = values::<T>(14, indices.len() * row_len, 1.0, false);
                        let (mut w, mut m, mut v) = (var0.clone(), m0.clone(), v0.clone());
                        c.apply_sparse_rows(&mut w, &mut m, &mut v, &g, indices, row_len, rmsprop)
                            .unwrap();
                        let sw = Placed::new(&var0, skew[0]);
                        let sm = Placed::new(&m0, skew[1]);
                        let sv = Placed::new(&v0, skew[2]);
                        let sg = Placed::new(&g, skew[3]);
                        c.apply_sparse_rows_shared(
                            sw.cells(),
                            sm.cells(),
                            sv.cells(),
                            sg.cells(),
                            indices,
                            row_len,
                            rmsprop,
                        )
                        .unwrap();
                        let what = format!(
                            "{name}, {} indices, row_len {row_len}, skews {skew:?}, rmsprop {rmsprop}",
                            indices.len()
                        );
                        assert_eq!(bits(&sw.values()), bits(&w), "{what}: var");
                        assert_eq!(bits(&sm.values()), bits(&m), "{what}: m");
                        assert_eq!(bits(&sv.values()), bits(&v), "{what}: v");
                        // Rows 1, 2 and 3 are not named: untouched (lazy).
                        assert_eq!(
                            bits(&sw.values()[row_len..4 * row_len]),
                            bits(&var0[row_len..4 * row_len]),
                            "{what}: rows not named"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn sparse_shared_gives_the_slice_kernel_bits_for_every_dtype() {
        sparse_matches_slices::<f32>("f32");
        sparse_matches_slices::<f64>("f64");
        sparse_matches_slices::<f16>("f16");
        sparse_matches_slices::<bf16>("bf16");
    }

    fn powers_match<T: SharedReal>(name: &str) {
        let t = |x: f64| T::from(x).unwrap();
        let (mut p1, mut p2) = (t(0.9), t(0.999));
        let (c1, c2) = (T::cell(p1), T::cell(p2));
        for _ in 0..5 {
            super::super::advance_powers(&mut p1, &mut p2, t(0.9), t(0.999));
            advance_powers_shared::<T>(&c1, &c2, t(0.9), t(0.999));
        }
        assert_eq!(
            bits(&[T::load(&c1), T::load(&c2)]),
            bits(&[p1, p2]),
            "{name}"
        );
    }

    #[test]
    fn shared_powers_give_the_sequential_bits() {
        powers_match::<f32>("f32");
        powers_match::<f64>("f64");
        powers_match::<f16>("f16");
        powers_match::<bf16>("bf16");
    }

    #[test]
    fn bad_shapes_and_indices_are_errors_and_write_nothing() {
        let c = coeffs::<f32>();
        let (w, m, v) = (
            cells(&[1.0f32; 4]),
            cells(&[0.0f32; 4]),
            cells(&[0.0f32; 4]),
        );
        let err = c
            .apply_dense_shared(&w, &m, &v, &cells(&[1.0f32; 3]), false)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "shape mismatch: grad vs var: expected 4, got 3"
        );
        let err = c.apply_dense_shared(&[], &[], &[], &[], false).unwrap_err();
        assert_eq!(err.to_string(), "var is empty");

        c.apply_sparse_rows_shared(&w, &m, &v, &cells(&[1.0f32; 4]), &[0i32, 1, 3, 2], 1, false)
            .unwrap();
        let err = c
            .apply_sparse_rows_shared(&w, &m, &v, &cells(&[1.0f32; 2]), &[1i64, 4], 1, false)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Index 4 at offset 1 in indices is out of range"
        );
        // The first call moved every element once; the failing one wrote nothing more.
        let once = {
            let (mut w, mut m, mut v) = ([1.0f32; 4], [0.0f32; 4], [0.0f32; 4]);
            c.apply_dense_chunk(&mut w, &mut m, &mut v, &[1.0; 4], false)
                .unwrap();
            w
        };
        assert_eq!(loaded::<f32>(&w), once);

        let err = c
            .apply_sparse_rows_shared(&w, &m, &cells(&[0.0f32; 3]), &[], &[0i32; 0], 1, false)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "shape mismatch: v vs var: expected 4, got 3"
        );
        let err = c
            .apply_sparse_rows_shared(&w, &m, &v, &cells(&[1.0f32; 3]), &[0i32], 3, false)
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("shape mismatch: row length vs var length"),
            "{err}"
        );
    }

    // Threads run dense and sparse updates and power advances on the same cells at once: no data
    // race (Miri checks), every value stays finite, and no power advance is lost.
    #[test]
    fn concurrent_updates_of_the_same_cells_are_defined() {
        let (threads, steps, row_len, rows) = if cfg!(miri) {
            (3, 2, 3, 4)
        } else {
            (4, 200, 40, 50)
        };
        let n = rows * row_len;
        let var = cells(&values::<f32>(21, n, 2.0, false));
        let (m, v) = (cells(&vec![0.0f32; n]), cells(&vec![0.0f32; n]));
        let (p1, p2) = (AtomicF32::new(0.9), AtomicF32::new(0.999));
        std::thread::scope(|s| {
            for t in 0..threads {
                let (var, m, v, p1, p2) = (&var, &m, &v, &p1, &p2);
                s.spawn(move || {
                    let dense_grad = cells(&values::<f32>(30 + t as u64, n, 1.0, false));
                    let sparse_grad = cells(&values::<f32>(40 + t as u64, 3 * row_len, 1.0, false));
                    let indices = [t % rows, (t + 1) % rows, t % rows];
                    for step in 0..steps {
                        // The powers may be advanced by other threads between these two reads;
                        // each read still sees a value some thread stored, in [0, 1).
                        let c = AdamCoeffs::new(0.001f32, 0.9, 0.999, 1e-8, p1.load(), p2.load())
                            .unwrap();
                        if (step + t) % 2 == 0 {
                            c.apply_dense_shared(var, m, v, &dense_grad, t % 3 == 0)
                                .unwrap();
                        } else {
                            c.apply_sparse_rows_shared(
                                var,
                                m,
                                v,
                                &sparse_grad,
                                &indices,
                                row_len,
                                false,
                            )
                            .unwrap();
                        }
                        advance_powers_shared::<f32>(p1, p2, 0.9, 0.999);
                    }
                });
            }
        });
        for (name, xs) in [("var", &var), ("m", &m), ("v", &v)] {
            assert!(loaded::<f32>(xs).iter().all(|x| x.is_finite()), "{name}");
        }
        let (mut w1, mut w2) = (0.9f32, 0.999f32);
        for _ in 0..threads * steps {
            super::super::advance_powers(&mut w1, &mut w2, 0.9, 0.999);
        }
        assert_eq!(
            (p1.load().to_bits(), p2.load().to_bits()),
            (w1.to_bits(), w2.to_bits())
        );
    }
}
