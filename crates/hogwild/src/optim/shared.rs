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
//! `store/atomic.rs`, states the rules), loaded and stored with `Ordering::Relaxed`, which
//! compiles to plain moves on x86-64 and AArch64. The kernels copy up to [`CHUNK`] elements of var, m, v and grad into local
//! arrays, run the slice kernels' compiled loop on them (the same element rules
//! [`adam_async_element`](super::adam_async_element) / [`rmsprop_element`](super::rmsprop_element),
//! vectorised, picked per CPU) and store var, m and v back. With no concurrent writer the results
//! are therefore bit-identical to the slice kernels', for every element type and rule.
//!
//! Under concurrency an element's read-modify-write is not atomic as a whole: another kernel's
//! store between this kernel's load and store of a chunk is overwritten (Hogwild's contract, as in
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

use super::{check_same_len, check_sparse, row_range, AdamCoeffs, AdamRule, SparseIndex};
use crate::store::SharedReal;
use crate::Result;

/// Elements copied into local arrays per step of the shared kernels (four arrays of 256 f64 are
/// 8 KiB, well inside L1).
pub const CHUNK: usize = 256;

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
        check_same_len(
            &["var", "m", "v", "grad"],
            &[var.len(), m.len(), v.len(), grad.len()],
        )?;
        let rule = AdamRule::dense(use_nesterov);
        Scratch::new(var.len()).run(self, rule, var, m, v, grad);
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
        check_same_len(&["var", "m", "v"], &[var.len(), m.len(), v.len()])?;
        let rows = check_sparse(var.len(), row_len, grad, indices)?;
        let rule = AdamRule::sparse(rmsprop);
        let mut scratch = Scratch::new(row_len);
        let grad_rows = grad.chunks_exact(row_len);
        for (offset, (&index, g)) in indices.iter().zip(grad_rows).enumerate() {
            // Already validated by `check_sparse`; an error here is impossible, not a fallback.
            let range = row_range(index, offset, rows, row_len)?;
            // In bounds: `range` ends at most at `rows * row_len`, the common length of the slices.
            let (w, m, v) = (&var[range.clone()], &m[range.clone()], &v[range]);
            scratch.run(self, rule, w, m, v, g);
        }
        Ok(())
    }
}

/// Local copies of up to [`CHUNK`] elements of var, m, v and grad.
struct Scratch<T> {
    var: Vec<T>,
    m: Vec<T>,
    v: Vec<T>,
    grad: Vec<T>,
}

impl<T: SharedReal> Scratch<T> {
    /// Room for chunks of at most `len` elements.
    fn new(len: usize) -> Self {
        let n = len.clamp(1, CHUNK);
        Self {
            var: vec![T::zero(); n],
            m: vec![T::zero(); n],
            v: vec![T::zero(); n],
            grad: vec![T::zero(); n],
        }
    }

    /// Runs `rule` over equal-length slices of cells, one chunk at a time: load, compute, store.
    fn run(
        &mut self,
        c: &AdamCoeffs<T>,
        rule: AdamRule,
        var: &[T::Cell],
        m: &[T::Cell],
        v: &[T::Cell],
        grad: &[T::Cell],
    ) {
        let n = self.var.len();
        let chunks = var
            .chunks(n)
            .zip(m.chunks(n))
            .zip(v.chunks(n))
            .zip(grad.chunks(n));
        for (((var, m), v), grad) in chunks {
            let k = var.len();
            let (w_buf, m_buf) = (&mut self.var[..k], &mut self.m[..k]);
            let (v_buf, g_buf) = (&mut self.v[..k], &mut self.grad[..k]);
            load(var, w_buf);
            load(m, m_buf);
            load(v, v_buf);
            load(grad, g_buf);
            c.run_rule(rule, w_buf, m_buf, v_buf, g_buf);
            store(var, w_buf);
            store(m, m_buf);
            store(v, v_buf);
        }
    }
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
    //! (`cargo +nightly miri test -p hogwild --lib optim::shared`).

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

    /// Lengths around the chunk size: the tails and the chunk boundaries (fewer under Miri, which
    /// interprets every element).
    fn lengths() -> &'static [usize] {
        if cfg!(miri) {
            &[1, 7, CHUNK + 1]
        } else {
            &[1, 7, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 5]
        }
    }

    fn dense_matches_slices<T: SharedReal>(name: &str) {
        let c = coeffs::<T>();
        for &n in lengths() {
            for nesterov in [false, true] {
                let seed = n as u64;
                let var0 = values::<T>(seed, n, 4.0, false);
                let m0 = values::<T>(seed + 1, n, 0.2, false);
                let v0 = values::<T>(seed + 2, n, 0.05, true);
                let g = values::<T>(seed + 3, n, 1.0, false);
                let (mut w, mut m, mut v) = (var0.clone(), m0.clone(), v0.clone());
                c.apply_dense_chunk(&mut w, &mut m, &mut v, &g, nesterov)
                    .unwrap();
                let (sw, sm, sv) = (cells(&var0), cells(&m0), cells(&v0));
                c.apply_dense_shared(&sw, &sm, &sv, &cells(&g), nesterov)
                    .unwrap();
                let what = format!("{name}, n {n}, nesterov {nesterov}");
                assert_eq!(bits(&loaded::<T>(&sw)), bits(&w), "{what}: var");
                assert_eq!(bits(&loaded::<T>(&sm)), bits(&m), "{what}: m");
                assert_eq!(bits(&loaded::<T>(&sv)), bits(&v), "{what}: v");
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
        // Duplicates (row 4 three times, row 0 twice) apply one after the other.
        let indices = [4i64, 0, 4, 5, 0, 4];
        let row_lens: &[usize] = if cfg!(miri) {
            &[1, CHUNK + 3]
        } else {
            &[1, 19, CHUNK + 3]
        };
        for &row_len in row_lens {
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
                c.apply_sparse_rows(&mut w, &mut m, &mut v, &g, &indices, row_len, rmsprop)
                    .unwrap();
                let (sw, sm, sv) = (cells(&var0), cells(&m0), cells(&v0));
                c.apply_sparse_rows_shared(&sw, &sm, &sv, &cells(&g), &indices, row_len, rmsprop)
                    .unwrap();
                let what = format!("{name}, row_len {row_len}, rmsprop {rmsprop}");
                assert_eq!(bits(&loaded::<T>(&sw)), bits(&w), "{what}: var");
                assert_eq!(bits(&loaded::<T>(&sm)), bits(&m), "{what}: m");
                assert_eq!(bits(&loaded::<T>(&sv)), bits(&v), "{what}: v");
                // Row 1, 2 and 3 are not named: untouched (lazy).
                assert_eq!(
                    bits(&loaded::<T>(&sw[row_len..4 * row_len])),
                    bits(&var0[row_len..4 * row_len]),
                    "{what}: rows not named"
                );
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
