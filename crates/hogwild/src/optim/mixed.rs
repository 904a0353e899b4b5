//! Mixed precision: variables stored in a half type (f16, bf16), their optimizer state (m, v, the
//! beta powers) and the hyper-parameters in f32, the AdamAsync rule computed in f32.
//!
//! # Why
//!
//! The kernels generic over `T` keep everything in `T` and round to `T` after every operation, as
//! DeepRec's op signatures and TensorFlow's half kernels do. With Adam's defaults that fails:
//!
//! - bf16 (8 significant bits) rounds `beta2 = 0.999` and `beta2_power` to 1, so the step size
//!   `lr * sqrt(1 - beta2_power) / (1 - beta1_power)` is 0 (stock `ResourceApplyAdam` then
//!   divides by `sqrt(v) + epsilon` with `v` never updated, and diverges a step later); a bf16 `v`
//!   cannot decay by 0.1% a step either, as that is less than half its spacing.
//! - f16 rounds `epsilon = 1e-8` to 0, so an element whose gradient is 0 gets `0 / 0`, NaN; and
//!   `v = (1 - beta2) * g * g` underflows to 0 for gradients below about 0.008 (f16's smallest
//!   subnormal is 6e-8), which makes the step `m / sqrt(v)` blow up.
//!
//! # What
//!
//! [`AdamCoeffs<C>`] (in practice `C = f32`, computed from f32 hyper-parameters and powers) updates
//! a variable stored as `S` ([`Widen<C>`]) whose m and v are `C`: each chunk of var and grad is
//! widened exactly to `C`, the loop of `C` runs on it (the rules of [`adam_async_element`] and
//! [`rmsprop_element`], so the result is that of an f32 variable holding the same values), and var
//! is rounded back to `S` once (to nearest, ties to even). The whole kernel, conversions included,
//! is compiled and picked per CPU by the one dispatch of every AdamAsync kernel
//! (`optim/kernel.rs`). The
//! caller advances the powers in `C` ([`advance_powers`], [`advance_powers_shared`]).
//!
//! What rounding remains is the variable's own: a bf16 weight `w` changes only when the step
//! exceeds half its spacing (between `|w| / 512` and `|w| / 256`; with `lr = 0.001`, weights of
//! magnitude 0.5 or more hardly move); float32 weights (Keras' `mixed_bfloat16` policy) avoid it.
//!
//! The slice kernels ([`AdamCoeffs::apply_dense_mixed`], [`AdamCoeffs::apply_sparse_rows_mixed`])
//! and the shared-memory kernels ([`AdamCoeffs::apply_dense_mixed_shared`],
//! [`AdamCoeffs::apply_sparse_rows_mixed_shared`], relaxed atomic loads and stores only, as in
//! the shared kernels of `optim/shared.rs`) give the same bits when nothing else writes.
//!
//! [`adam_async_element`]: super::adam_async_element
//! [`rmsprop_element`]: super::rmsprop_element
//! [`advance_powers`]: super::advance_powers
//! [`advance_powers_shared`]: super::advance_powers_shared

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use std::ops::Range;

use super::kernel::{self, rule_body, Dense, Sparse, Tables};
use super::shared::{load, store};
use super::SharedReal;
use super::{AdamCoeffs, AdamRule, Real, RowTable, SparseIndex};
use crate::store::LineCopy;
use crate::Result;

/// Elements widened into local arrays per step (five arrays of 256 f64 are 10 KiB, well inside
/// L1).
pub(super) const CHUNK: usize = 256;

/// A storage type whose every value the compute type `C` holds exactly.
pub trait Widen<C: Real>: Real {
    /// Widens `src` into `dst` (equal lengths); exact.
    fn widen(src: &[Self], dst: &mut [C]);
    /// Rounds `src` into `dst` (equal lengths) to nearest, ties to even.
    fn narrow(src: &[C], dst: &mut [Self]);
}

/// Storage in the compute type itself: the plain kernels' bits.
impl<T: Real> Widen<T> for T {
    fn widen(src: &[T], dst: &mut [T]) {
        dst.copy_from_slice(src);
    }
    fn narrow(src: &[T], dst: &mut [T]) {
        dst.copy_from_slice(src);
    }
}

// `half`'s slice conversions use F16C when the CPU has it and give the bits of
// `f16::from_f32` / `to_f32` element by element either way.
impl Widen<f32> for f16 {
    fn widen(src: &[f16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    fn narrow(src: &[f32], dst: &mut [f16]) {
        dst.convert_from_f32_slice(src);
    }
}

impl Widen<f32> for bf16 {
    fn widen(src: &[bf16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
    fn narrow(src: &[f32], dst: &mut [bf16]) {
        dst.convert_from_f32_slice(src);
    }
}

impl<C: Real> AdamCoeffs<C> {
    /// The dense rule computed in `C` over equal-length, non-empty slices, var and grad stored as
    /// `S`, m and v as `C` (no power update). Shardable: elements are independent, so any split
    /// gives the same bits.
    pub fn apply_dense_mixed<S: Widen<C>>(
        &self,
        var: &mut [S],
        m: &mut [C],
        v: &mut [C],
        grad: &[S],
        use_nesterov: bool,
    ) -> Result<()> {
        let wide = Wide::new(var.len());
        let work = Dense::new(MixedSlices { var, m, v, wide }, grad)?;
        kernel::run(self, AdamRule::dense(use_nesterov), work);
        Ok(())
    }

    /// The sparse rule (lazy Adam, or RMSProp when `rmsprop`) computed in `C` on the rows named by
    /// `indices` of a `[rows, row_len]` variable stored row-major as `S`, with m and v in `C` (no
    /// power update), as [`AdamCoeffs::apply_sparse_rows`]: every index is validated before
    /// anything is written, then rows apply in order.
    #[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
    pub fn apply_sparse_rows_mixed<S: Widen<C>, I: SparseIndex>(
        &self,
        var: &mut [S],
        m: &mut [C],
        v: &mut [C],
        grad: &[S],
        indices: &[I],
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        let wide = Wide::new(row_len);
        let work = Sparse::new(MixedSlices { var, m, v, wide }, grad, indices, row_len)?;
        kernel::run(self, AdamRule::sparse(rmsprop), work)
    }
}

impl<C: SharedReal> AdamCoeffs<C> {
    /// [`AdamCoeffs::apply_dense_mixed`] on cells that other threads may access at the same time
    /// (relaxed atomic loads and stores, as [`AdamCoeffs::apply_dense_shared`]).
    pub fn apply_dense_mixed_shared<S: Widen<C> + SharedReal>(
        &self,
        var: &[S::Cell],
        m: &[C::Cell],
        v: &[C::Cell],
        grad: &[S::Cell],
        use_nesterov: bool,
    ) -> Result<()> {
        let wide = Wide::new(var.len());
        let work = Dense::new(MixedCells::<S, C> { var, m, v, wide }, grad)?;
        kernel::run(self, AdamRule::dense(use_nesterov), work);
        Ok(())
    }

    /// [`AdamCoeffs::apply_sparse_rows_mixed`] on cells that other threads may access at the same
    /// time (as [`AdamCoeffs::apply_sparse_rows_shared`]).
    #[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
    pub fn apply_sparse_rows_mixed_shared<S: Widen<C> + SharedReal, I: SparseIndex>(
        &self,
        var: &[S::Cell],
        m: &[C::Cell],
        v: &[C::Cell],
        grad: &[S::Cell],
        indices: &[I],
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        let wide = Wide::new(row_len);
        let work = Sparse::new(
            MixedCells::<S, C> { var, m, v, wide },
            grad,
            indices,
            row_len,
        )?;
        kernel::run(self, AdamRule::sparse(rmsprop), work)
    }
}

/// Local arrays of up to [`CHUNK`] elements: var and grad widened to `C`; m and v, which the
/// shared kernels load from cells (the slice kernels use the caller's m and v in place); one
/// array of `S` that the shared kernels load var and grad into and store var from.
struct Wide<S, C> {
    var: Vec<C>,
    grad: Vec<C>,
    m: Vec<C>,
    v: Vec<C>,
    narrow: Vec<S>,
}

impl<S: Widen<C>, C: Real> Wide<S, C> {
    /// Room for chunks of at most `len` elements.
    fn new(len: usize) -> Self {
        let n = len.clamp(1, CHUNK);
        Self {
            var: vec![C::zero(); n],
            grad: vec![C::zero(); n],
            m: vec![C::zero(); n],
            v: vec![C::zero(); n],
            narrow: vec![S::zero(); n],
        }
    }
}

/// var stored as `S`, m and v as `C`, in slices: each chunk of var and grad is widened, the rule
/// runs (m and v in place), var is rounded back.
struct MixedSlices<'a, S, C> {
    var: &'a mut [S],
    m: &'a mut [C],
    v: &'a mut [C],
    wide: Wide<S, C>,
}

impl<S: Widen<C>, C: Real> Tables<C> for MixedSlices<'_, S, C> {
    type Grad = S;

    #[inline(always)]
    fn row_tables(&self) -> [RowTable; 3] {
        RowTable::three(self.var, self.m, self.v)
    }

    #[inline(always)]
    fn run<const RULE: u8, L: LineCopy>(&mut self, c: &AdamCoeffs<C>, r: Range<usize>, g: &[S]) {
        let wide = &mut self.wide;
        let n = wide.var.len();
        // In bounds: `r` ends at most at the common length of the slices (`Dense`, `Sparse`).
        let chunks = self.var[r.clone()]
            .chunks_mut(n)
            .zip(self.m[r.clone()].chunks_mut(n))
            .zip(self.v[r].chunks_mut(n))
            .zip(g.chunks(n));
        for (((var, m), v), grad) in chunks {
            let k = var.len();
            let (w_buf, g_buf) = (&mut wide.var[..k], &mut wide.grad[..k]);
            S::widen(var, w_buf);
            S::widen(grad, g_buf);
            rule_body::<C, RULE>(c, w_buf, m, v, g_buf);
            S::narrow(w_buf, var);
        }
    }
}

/// var stored as `S`, m and v as `C`, in cells: each chunk is loaded (var and grad widened), the
/// rule runs, and var (rounded back), m and v are stored, one relaxed atomic access per cell.
struct MixedCells<'a, S: SharedReal, C: SharedReal> {
    var: &'a [S::Cell],
    m: &'a [C::Cell],
    v: &'a [C::Cell],
    wide: Wide<S, C>,
}

impl<S: Widen<C> + SharedReal, C: SharedReal> Tables<C> for MixedCells<'_, S, C> {
    type Grad = S::Cell;

    #[inline(always)]
    fn row_tables(&self) -> [RowTable; 3] {
        RowTable::three(self.var, self.m, self.v)
    }

    #[inline(always)]
    fn run<const RULE: u8, L: LineCopy>(
        &mut self,
        c: &AdamCoeffs<C>,
        r: Range<usize>,
        g: &[S::Cell],
    ) {
        let wide = &mut self.wide;
        let n = wide.var.len();
        // In bounds: `r` ends at most at the common length of the slices (`Dense`, `Sparse`).
        let chunks = self.var[r.clone()]
            .chunks(n)
            .zip(self.m[r.clone()].chunks(n))
            .zip(self.v[r].chunks(n))
            .zip(g.chunks(n));
        for (((var, m), v), grad) in chunks {
            let k = var.len();
            let narrow = &mut wide.narrow[..k];
            let (w_buf, g_buf) = (&mut wide.var[..k], &mut wide.grad[..k]);
            let (m_buf, v_buf) = (&mut wide.m[..k], &mut wide.v[..k]);
            load::<S>(var, narrow);
            S::widen(narrow, w_buf);
            load::<S>(grad, narrow);
            S::widen(narrow, g_buf);
            load::<C>(m, m_buf);
            load::<C>(v, v_buf);
            rule_body::<C, RULE>(c, w_buf, m_buf, v_buf, g_buf);
            S::narrow(w_buf, narrow);
            store::<S>(var, narrow);
            store::<C>(m, m_buf);
            store::<C>(v, v_buf);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The mixed kernels against the f32 element rules applied one element at a time, the slice
    //! and shared kernels against each other, and f32 storage against the plain kernels. The
    //! shared kernels run under Miri with `optim::mixed::` (`make miri`).

    use half::{bf16, f16};

    use super::*;
    use crate::optim::{adam_async_element, rmsprop_element};
    use crate::rng::test_values as values;

    fn cells<T: SharedReal>(xs: &[T]) -> Vec<T::Cell> {
        xs.iter().map(|&x| T::cell(x)).collect()
    }

    fn loaded<T: SharedReal>(cells: &[T::Cell]) -> Vec<T> {
        cells.iter().map(T::load).collect()
    }

    fn bits<T: Real>(xs: &[T]) -> Vec<u64> {
        xs.iter().map(|x| x.to_f64_lossy().to_bits()).collect()
    }

    /// Adam's defaults with the powers after two steps: in bf16, beta2 and beta2_power would be 1.
    fn coeffs() -> AdamCoeffs<f32> {
        AdamCoeffs::new(0.001, 0.9, 0.999, 1e-8, 0.81, 0.998001).unwrap()
    }

    fn rmsprop_coeffs() -> AdamCoeffs<f32> {
        AdamCoeffs::new_rmsprop(0.001, 0.9, 0.999, 1e-8).unwrap()
    }

    fn lengths() -> &'static [usize] {
        if cfg!(miri) {
            &[1, 7, CHUNK + 1]
        } else {
            &[1, 7, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 5]
        }
    }

    fn one<S: Widen<f32>>(x: S) -> f32 {
        let mut out = [0f32];
        S::widen(&[x], &mut out);
        out[0]
    }

    fn back<S: Widen<f32>>(x: f32) -> S {
        let mut out = [S::zero()];
        S::narrow(&[x], &mut out);
        out[0]
    }

    /// The reference: widen one weight and gradient, run the f32 rule, round the weight back.
    fn element_by_element<S: Widen<f32>>(
        c: &AdamCoeffs<f32>,
        rule: AdamRule,
        var: &mut [S],
        m: &mut [f32],
        v: &mut [f32],
        g: &[S],
    ) {
        for i in 0..var.len() {
            let (mut w, g) = (one(var[i]), one(g[i]));
            match rule {
                AdamRule::Adam => {
                    adam_async_element::<f32, false>(&mut w, &mut m[i], &mut v[i], g, c)
                }
                AdamRule::Nesterov => {
                    adam_async_element::<f32, true>(&mut w, &mut m[i], &mut v[i], g, c)
                }
                AdamRule::RmsProp => rmsprop_element(&mut w, &mut m[i], &mut v[i], g, c),
            }
            var[i] = back(w);
        }
    }

    fn dense_matches_the_f32_rule<S: Widen<f32> + SharedReal>(name: &str) {
        let c = coeffs();
        for &n in lengths() {
            for nesterov in [false, true] {
                let seed = n as u64;
                let var0 = values::<S>(seed, n, 4.0, false);
                let m0 = values::<f32>(seed + 1, n, 0.2, false);
                let v0 = values::<f32>(seed + 2, n, 0.05, true);
                let g = values::<S>(seed + 3, n, 1.0, false);
                let (mut w, mut m, mut v) = (var0.clone(), m0.clone(), v0.clone());
                let rule = AdamRule::dense(nesterov);
                element_by_element(&c, rule, &mut w, &mut m, &mut v, &g);
                let what = format!("{name}, n {n}, nesterov {nesterov}");

                let (mut sw, mut sm, mut sv) = (var0.clone(), m0.clone(), v0.clone());
                c.apply_dense_mixed(&mut sw, &mut sm, &mut sv, &g, nesterov)
                    .unwrap();
                assert_eq!(bits(&sw), bits(&w), "{what}: slices, var");
                assert_eq!(bits(&sm), bits(&m), "{what}: slices, m");
                assert_eq!(bits(&sv), bits(&v), "{what}: slices, v");

                let (cw, cm, cv) = (cells(&var0), cells(&m0), cells(&v0));
                c.apply_dense_mixed_shared::<S>(&cw, &cm, &cv, &cells(&g), nesterov)
                    .unwrap();
                assert_eq!(bits(&loaded::<S>(&cw)), bits(&w), "{what}: cells, var");
                assert_eq!(bits(&loaded::<f32>(&cm)), bits(&m), "{what}: cells, m");
                assert_eq!(bits(&loaded::<f32>(&cv)), bits(&v), "{what}: cells, v");
            }
        }
    }

    #[test]
    fn dense_mixed_gives_the_f32_rule_rounded_once() {
        dense_matches_the_f32_rule::<f16>("f16");
        dense_matches_the_f32_rule::<bf16>("bf16");
        dense_matches_the_f32_rule::<f32>("f32");
    }

    fn sparse_matches_the_f32_rule<S: Widen<f32> + SharedReal>(name: &str) {
        // Duplicates (row 4 three times, row 0 twice) apply one after the other.
        let indices = [4i64, 0, 4, 5, 0, 4];
        let row_lens: &[usize] = if cfg!(miri) {
            &[1, CHUNK + 3]
        } else {
            &[1, 19, CHUNK + 3]
        };
        for &row_len in row_lens {
            for rmsprop in [false, true] {
                let c = if rmsprop { rmsprop_coeffs() } else { coeffs() };
                let n = 6 * row_len;
                let var0 = values::<S>(11, n, 4.0, false);
                let m0 = values::<f32>(12, n, 0.2, false);
                let v0 = values::<f32>(13, n, 0.05, true);
                let g = values::<S>(14, indices.len() * row_len, 1.0, false);
                let (mut w, mut m, mut v) = (var0.clone(), m0.clone(), v0.clone());
                for (k, &i) in indices.iter().enumerate() {
                    let r = i as usize * row_len..(i as usize + 1) * row_len;
                    let gk = &g[k * row_len..(k + 1) * row_len];
                    let (w, m, v) = (&mut w[r.clone()], &mut m[r.clone()], &mut v[r]);
                    element_by_element(&c, AdamRule::sparse(rmsprop), w, m, v, gk);
                }
                let what = format!("{name}, row_len {row_len}, rmsprop {rmsprop}");

                let (mut sw, mut sm, mut sv) = (var0.clone(), m0.clone(), v0.clone());
                c.apply_sparse_rows_mixed(
                    &mut sw, &mut sm, &mut sv, &g, &indices, row_len, rmsprop,
                )
                .unwrap();
                assert_eq!(bits(&sw), bits(&w), "{what}: slices, var");
                assert_eq!(bits(&sm), bits(&m), "{what}: slices, m");
                assert_eq!(bits(&sv), bits(&v), "{what}: slices, v");

                let (cw, cm, cv) = (cells(&var0), cells(&m0), cells(&v0));
                c.apply_sparse_rows_mixed_shared::<S, _>(
                    &cw,
                    &cm,
                    &cv,
                    &cells(&g),
                    &indices,
                    row_len,
                    rmsprop,
                )
                .unwrap();
                assert_eq!(bits(&loaded::<S>(&cw)), bits(&w), "{what}: cells, var");
                assert_eq!(bits(&loaded::<f32>(&cm)), bits(&m), "{what}: cells, m");
                assert_eq!(bits(&loaded::<f32>(&cv)), bits(&v), "{what}: cells, v");
                // Rows 1, 2 and 3 are not named: untouched (lazy).
                let rest = row_len..4 * row_len;
                assert_eq!(
                    bits(&sw[rest.clone()]),
                    bits(&var0[rest.clone()]),
                    "{what}: var"
                );
                assert_eq!(bits(&sv[rest.clone()]), bits(&v0[rest]), "{what}: v");
            }
        }
    }

    #[test]
    fn sparse_mixed_gives_the_f32_rule_rounded_once() {
        sparse_matches_the_f32_rule::<f16>("f16");
        sparse_matches_the_f32_rule::<bf16>("bf16");
        sparse_matches_the_f32_rule::<f32>("f32");
    }

    // Storage in the compute type is the plain kernels, bit for bit.
    #[test]
    fn f32_storage_gives_the_plain_kernel_bits() {
        let c = coeffs();
        let n = 2 * CHUNK + 3;
        let var0 = values::<f32>(1, n, 4.0, false);
        let g = values::<f32>(2, n, 1.0, false);
        let (mut w, mut m, mut v) = (var0.clone(), vec![0.1f32; n], vec![0.2f32; n]);
        c.apply_dense_chunk(&mut w, &mut m, &mut v, &g, false)
            .unwrap();
        let (mut mw, mut mm, mut mv) = (var0, vec![0.1f32; n], vec![0.2f32; n]);
        c.apply_dense_mixed(&mut mw, &mut mm, &mut mv, &g, false)
            .unwrap();
        assert_eq!(
            (bits(&mw), bits(&mm), bits(&mv)),
            (bits(&w), bits(&m), bits(&v))
        );
    }

    // What the module is for, with Adam's defaults at step one (where the step is lr * sign(g)):
    // a small bf16 weight moves, an f16 element with a zero gradient stays finite and put, and an
    // f16 gradient of 1e-3 (whose (1 - beta2) * g * g is below f16's range) moves its weight by lr.
    #[test]
    fn defaults_train_half_variables() {
        let c = AdamCoeffs::new(0.001f32, 0.9, 0.999, 1e-8, 0.9, 0.999).unwrap();
        let mut w = [bf16::from_f32(0.1), bf16::from_f32(-0.1)];
        let g = [bf16::from_f32(0.3), bf16::from_f32(-2.0)];
        let (mut m, mut v) = ([0f32; 2], [0f32; 2]);
        c.apply_dense_mixed(&mut w, &mut m, &mut v, &g, false)
            .unwrap();
        assert_eq!(w, [bf16::from_f32(0.099), bf16::from_f32(-0.099)]);

        let mut w = [f16::from_f32(1.0), f16::from_f32(2.0)];
        let g = [f16::ZERO, f16::from_f32(1e-3)];
        let (mut m, mut v) = ([0f32; 2], [0f32; 2]);
        c.apply_dense_mixed(&mut w, &mut m, &mut v, &g, false)
            .unwrap();
        assert_eq!(w, [f16::from_f32(1.0), f16::from_f32(2.0 - 0.001)]);
        assert!(v[1] > 0.0 && f16::from_f32(v[1]) == f16::ZERO, "{v:?}");
    }

    #[test]
    fn bad_shapes_and_indices_are_errors_and_write_nothing() {
        let c = coeffs();
        let mut w = [bf16::ONE; 4];
        let (mut m, mut v) = ([0f32; 4], [0f32; 4]);
        let err = c
            .apply_dense_mixed(&mut w, &mut m, &mut v, &[bf16::ONE; 3], false)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "shape mismatch: grad vs var: expected 4, got 3"
        );
        let err = c
            .apply_dense_mixed(&mut w, &mut m[..3], &mut v, &[bf16::ONE; 4], false)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "shape mismatch: m vs var: expected 4, got 3"
        );
        let g = [bf16::ONE; 2];
        let err = c
            .apply_sparse_rows_mixed(&mut w, &mut m, &mut v, &g, &[1i64, 4], 1, false)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Index 4 at offset 1 in indices is out of range"
        );
        let (cw, cm, cv) = (cells(&w), cells(&m), cells(&v));
        let err = c
            .apply_sparse_rows_mixed_shared::<bf16, _>(
                &cw,
                &cm,
                &cv,
                &cells(&g),
                &[1i32, -1],
                1,
                false,
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Index -1 at offset 1 in indices is out of range"
        );
        assert_eq!(w, [bf16::ONE; 4]);
        assert_eq!(loaded::<bf16>(&cw), [bf16::ONE; 4]);
        assert_eq!(m, [0.0; 4]);
    }

    // Threads update the same bf16 weights and f32 moments at once: no data race (Miri checks),
    // values stay finite.
    #[test]
    fn concurrent_mixed_updates_of_the_same_cells_are_defined() {
        let (threads, steps, n) = if cfg!(miri) { (3, 2, 5) } else { (4, 100, 600) };
        let var = cells(&values::<bf16>(21, n, 2.0, false));
        let (m, v) = (cells(&vec![0f32; n]), cells(&vec![0f32; n]));
        std::thread::scope(|s| {
            for t in 0..threads {
                let (var, m, v) = (&var, &m, &v);
                s.spawn(move || {
                    let c = coeffs();
                    let g = cells(&values::<bf16>(30 + t as u64, n, 1.0, false));
                    let indices = [t % n, (t + 1) % n, t % n];
                    for step in 0..steps {
                        if (step + t) % 2 == 0 {
                            c.apply_dense_mixed_shared::<bf16>(var, m, v, &g, t % 3 == 0)
                                .unwrap();
                        } else {
                            c.apply_sparse_rows_mixed_shared::<bf16, _>(
                                var,
                                m,
                                v,
                                &g[..3],
                                &indices,
                                1,
                                t % 2 == 1,
                            )
                            .unwrap();
                        }
                    }
                });
            }
        });
        assert!(loaded::<bf16>(&var).iter().all(|x| x.is_finite()), "var");
        for (name, xs) in [("m", &m), ("v", &v)] {
            assert!(loaded::<f32>(xs).iter().all(|x| x.is_finite()), "{name}");
        }
    }
}
