//! AdamAsync: DeepRec's asynchronous Adam.
//!
//! The ops are DeepRec's `ApplyAdamAsync` / `SparseApplyAdamAsync` (and their resource forms); this
//! is their arithmetic, per element, with `b1p`, `b2p` the variable's beta powers before the step:
//!
//! ```text
//! alpha = lr * sqrt(1 - b2p) / (1 - b1p)
//! m = m * beta1 + g * (1 - beta1)
//! v = v * beta2 + g * g * (1 - beta2)
//! var -= m * alpha / (sqrt(v) + epsilon)                                  (Adam)
//! var -= (g * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon)      (nesterov, m updated)
//! b1p *= beta1; b2p *= beta2                                              (once per call)
//!
//! sparse RMSProp (stock SparseApplyRMSProp with ms = v, mom = m, rho = beta2, momentum = beta1):
//! v = v * beta2 + g * g * (1 - beta2)
//! m = m * beta1 + lr * g / sqrt(v + epsilon)
//! var -= m
//! ```
//!
//! `tests/optim_adam_async.rs` checks it against DeepRec's own test matrix and numpy references.
//! Differences from stock Adam, all deliberate:
//! - each variable owns its beta powers (`beta1_power`, `beta2_power`), which start at `beta1` /
//!   `beta2` and are multiplied once per apply call, inside the update, so no global step is shared;
//! - the original form of the moment updates, `m = m * beta1 + g * (1 - beta1)` (stock TensorFlow
//!   writes `m += (g - m) * (1 - beta1)`, which reads `m` twice);
//! - sparse updates are lazy: only the named rows are touched, the powers advance once per call and
//!   not at all for an update with no indices;
//! - `apply_sparse_rmsprop` switches sparse updates to an RMSProp rule (epsilon inside the sqrt, the
//!   powers neither read nor changed);
//! - `use_nesterov` applies to dense updates only: DeepRec's sparse ops have no such attribute.
//!
//! Duplicate indices in a sparse update are applied one after the other, in order, each seeing the
//! state the previous one left, with the coefficients computed once for the call (DeepRec applies
//! them concurrently and races). Sum duplicates first ([`sum_duplicate_indices`]) for the
//! aggregated-gradient semantics, as DeepRec's Python optimizer does.
//!
//! # Speed and bit identity
//!
//! The loops are plain element loops over zipped slices (no bounds checks, no per-element
//! branches), which the compiler vectorises. On x86-64 they are also compiled for AVX2 and AVX-512F
//! and the widest the CPU supports is picked at run time: one loop and one dispatch for every
//! storage (slices here, shared cells, mixed precision; `optim/kernel.rs`). Rust never contracts a
//! multiply and an add into an FMA, and every operation used (+, -, *, /, sqrt) is correctly
//! rounded in every instruction set, so all paths give the same bits as [`adam_async_element`] /
//! [`rmsprop_element`] applied one element at a time.
//!
//! [`sum_duplicate_indices`]: super::sum_duplicate_indices

use super::kernel::{self, Dense, Slices, Sparse};
use super::{Real, SparseIndex};
use crate::{Error, Result};

/// AdamAsync's hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamAsync<T> {
    /// Learning rate; finite (negative values ascend).
    pub lr: T,
    /// First-moment decay, in `[0, 1)`.
    pub beta1: T,
    /// Second-moment decay, in `[0, 1)`.
    pub beta2: T,
    /// Added to `sqrt(v)` (inside the sqrt for the RMSProp rule); finite, not negative.
    pub epsilon: T,
    /// Nesterov momentum for dense updates (sparse updates never use it, as in DeepRec).
    pub use_nesterov: bool,
    /// Sparse updates use the RMSProp rule instead of lazy Adam.
    pub apply_sparse_rmsprop: bool,
}

/// One variable's AdamAsync state: the moments and the variable's own beta powers.
#[derive(Debug, Clone, PartialEq)]
pub struct AdamAsyncState<T> {
    /// The first moment, one per element.
    pub m: Vec<T>,
    /// The second moment, one per element.
    pub v: Vec<T>,
    /// `beta1` to the power of the steps taken (times `beta1`: it starts at `beta1`).
    pub beta1_power: T,
    /// `beta2` to the power of the steps taken (times `beta2`).
    pub beta2_power: T,
}

impl<T: Real> AdamAsyncState<T> {
    /// Zero moments for `len` elements; powers start at `beta1` and `beta2`.
    pub fn new(len: usize, opt: &AdamAsync<T>) -> Self {
        Self {
            m: vec![T::zero(); len],
            v: vec![T::zero(); len],
            beta1_power: opt.beta1,
            beta2_power: opt.beta2,
        }
    }
}

/// Which AdamAsync rule a loop runs; the [`Optimizer`](super::Optimizer) step of [`AdamAsync`]
/// carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdamRule {
    /// `var -= m * alpha / (sqrt(v) + epsilon)`.
    Adam,
    /// `var -= (g * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon)`.
    Nesterov,
    /// The sparse RMSProp rule ([`rmsprop_element`]).
    RmsProp,
}

impl AdamRule {
    /// The dense rule: Adam, or Adam with nesterov momentum.
    pub fn dense(use_nesterov: bool) -> Self {
        if use_nesterov {
            AdamRule::Nesterov
        } else {
            AdamRule::Adam
        }
    }

    /// The sparse rule: lazy Adam, or RMSProp.
    pub fn sparse(rmsprop: bool) -> Self {
        if rmsprop {
            AdamRule::RmsProp
        } else {
            AdamRule::Adam
        }
    }
}

/// The per-call coefficients of an update, computed once from the hyper-parameters and the beta
/// powers before the step. Kernels that shard an update (the TF plugin's) compute these once, run
/// the element rule on every shard, then call [`advance_powers`] once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamCoeffs<T> {
    /// The learning rate.
    pub lr: T,
    /// `lr * sqrt(1 - beta2_power) / (1 - beta1_power)`
    pub alpha: T,
    /// The first moment's decay.
    pub beta1: T,
    /// `1 - beta1`.
    pub one_minus_beta1: T,
    /// The second moment's decay.
    pub beta2: T,
    /// `1 - beta2`.
    pub one_minus_beta2: T,
    /// Added to the root of the second moment.
    pub epsilon: T,
}

fn invalid<T: Real>(name: &'static str, x: T, reason: &'static str) -> Error {
    Error::InvalidHyperParameter {
        name,
        value: x.to_f64_lossy(),
        reason,
    }
}

fn check_finite<T: Real>(name: &'static str, x: T) -> Result<()> {
    if x.is_finite() {
        Ok(())
    } else {
        Err(invalid(name, x, "must be finite"))
    }
}

fn check_unit<T: Real>(name: &'static str, x: T) -> Result<()> {
    check_finite(name, x)?;
    if x >= T::zero() && x < T::one() {
        Ok(())
    } else {
        Err(invalid(name, x, "must be in [0, 1)"))
    }
}

fn check_hyper<T: Real>(lr: T, beta1: T, beta2: T, epsilon: T) -> Result<()> {
    check_finite("lr", lr)?;
    check_unit("beta1", beta1)?;
    check_unit("beta2", beta2)?;
    check_finite("epsilon", epsilon)?;
    if epsilon < T::zero() {
        return Err(invalid("epsilon", epsilon, "must not be negative"));
    }
    Ok(())
}

impl<T: Real> AdamCoeffs<T> {
    /// Validates the hyper-parameters and powers and computes the coefficients.
    ///
    /// Errors: `lr` or `epsilon` not finite, `epsilon` negative, `beta1`, `beta2` or a power outside
    /// `[0, 1)`, or a step size `alpha` that overflows the float type.
    pub fn new(
        lr: T,
        beta1: T,
        beta2: T,
        epsilon: T,
        beta1_power: T,
        beta2_power: T,
    ) -> Result<Self> {
        check_hyper(lr, beta1, beta2, epsilon)?;
        check_unit("beta1_power", beta1_power)?;
        check_unit("beta2_power", beta2_power)?;
        let one = T::one();
        let alpha = lr * (one - beta2_power).sqrt() / (one - beta1_power);
        if !alpha.is_finite() {
            return Err(invalid(
                "lr",
                lr,
                "step size lr * sqrt(1 - beta2_power) / (1 - beta1_power) overflows",
            ));
        }
        Ok(Self {
            lr,
            alpha,
            beta1,
            one_minus_beta1: one - beta1,
            beta2,
            one_minus_beta2: one - beta2,
            epsilon,
        })
    }

    /// Validates only what the RMSProp rule reads (the powers are not read; `alpha` is zero).
    pub fn new_rmsprop(lr: T, beta1: T, beta2: T, epsilon: T) -> Result<Self> {
        check_hyper(lr, beta1, beta2, epsilon)?;
        let one = T::one();
        Ok(Self {
            lr,
            alpha: T::zero(),
            beta1,
            one_minus_beta1: one - beta1,
            beta2,
            one_minus_beta2: one - beta2,
            epsilon,
        })
    }

    /// The dense rule over equal-length, non-empty slices (no power update). Shardable: elements
    /// are independent, so any split of the slices gives the same bits.
    pub fn apply_dense_chunk(
        &self,
        var: &mut [T],
        m: &mut [T],
        v: &mut [T],
        grad: &[T],
        use_nesterov: bool,
    ) -> Result<()> {
        let work = Dense::new(Slices { var, m, v }, grad)?;
        kernel::run(self, AdamRule::dense(use_nesterov), work);
        Ok(())
    }

    /// The sparse rule on the rows named by `indices` of a `[rows, row_len]` variable stored
    /// row-major (no power update): lazy Adam, or RMSProp when `rmsprop`. `grad` holds one row per
    /// index. Every index is validated before anything is written; rows then apply in order, so a
    /// duplicate index applies again to the state the previous one left.
    #[allow(clippy::too_many_arguments)] // the kernel's inputs, as in the TF op
    pub fn apply_sparse_rows<I: SparseIndex>(
        &self,
        var: &mut [T],
        m: &mut [T],
        v: &mut [T],
        grad: &[T],
        indices: &[I],
        row_len: usize,
        rmsprop: bool,
    ) -> Result<()> {
        let work = Sparse::new(Slices { var, m, v }, grad, indices, row_len)?;
        kernel::run(self, AdamRule::sparse(rmsprop), work)
    }
}

/// AdamAsync's rule for one element, in DeepRec's operation order:
/// `m = m*b1 + g*(1-b1)`, `v = v*b2 + g*g*(1-b2)`, `var -= m*alpha / (sqrt(v) + eps)`, or with
/// nesterov `var -= (g*(1-b1) + b1*m)*alpha / (sqrt(v) + eps)` (m already updated).
#[inline(always)]
pub fn adam_async_element<T: Real, const NESTEROV: bool>(
    var: &mut T,
    m: &mut T,
    v: &mut T,
    g: T,
    c: &AdamCoeffs<T>,
) {
    let m_new = *m * c.beta1 + g * c.one_minus_beta1;
    let v_new = *v * c.beta2 + g * g * c.one_minus_beta2;
    let denom = v_new.sqrt() + c.epsilon;
    let step = if NESTEROV {
        (g * c.one_minus_beta1 + c.beta1 * m_new) * c.alpha / denom
    } else {
        m_new * c.alpha / denom
    };
    *m = m_new;
    *v = v_new;
    *var = *var - step;
}

/// AdamAsync's sparse RMSProp rule for one element (stock `SparseApplyRMSProp` with ms=v, mom=m,
/// rho=beta2, momentum=beta1): `v = v*b2 + g*g*(1-b2)`, `m = m*b1 + rsqrt(v + eps)*lr*g`, `var -= m`.
#[inline(always)]
pub fn rmsprop_element<T: Real>(var: &mut T, m: &mut T, v: &mut T, g: T, c: &AdamCoeffs<T>) {
    let v_new = *v * c.beta2 + g * g * c.one_minus_beta2;
    let m_new = *m * c.beta1 + (v_new + c.epsilon).sqrt().recip() * c.lr * g;
    *v = v_new;
    *m = m_new;
    *var = *var - m_new;
}

/// Multiplies the powers once: `beta1_power *= beta1`, `beta2_power *= beta2`.
#[inline]
pub fn advance_powers<T: Real>(beta1_power: &mut T, beta2_power: &mut T, beta1: T, beta2: T) {
    *beta1_power = *beta1_power * beta1;
    *beta2_power = *beta2_power * beta2;
}

impl<T: Real> AdamAsync<T> {
    /// AdamAsync with DeepRec's defaults for the switches (no nesterov, lazy-Adam sparse rows).
    pub fn new(lr: T, beta1: T, beta2: T, epsilon: T) -> Self {
        Self {
            lr,
            beta1,
            beta2,
            epsilon,
            use_nesterov: false,
            apply_sparse_rmsprop: false,
        }
    }

    /// The coefficients for a step from `state`'s powers (validates hyper-parameters and powers).
    pub fn coeffs(&self, state: &AdamAsyncState<T>) -> Result<AdamCoeffs<T>> {
        AdamCoeffs::new(
            self.lr,
            self.beta1,
            self.beta2,
            self.epsilon,
            state.beta1_power,
            state.beta2_power,
        )
    }

    /// One dense step: every element of `var` moves, the powers advance once. Nothing is written
    /// when an error is returned.
    pub fn apply_dense(
        &self,
        var: &mut [T],
        state: &mut AdamAsyncState<T>,
        grad: &[T],
    ) -> Result<()> {
        self.dense_step(state, |c, m, v| {
            c.apply_dense_chunk(var, m, v, grad, self.use_nesterov)
        })
    }

    /// One sparse step on a `[rows, row_len]` variable stored row-major: `grad` holds one row per
    /// entry of `indices`. Lazy Adam (powers advance once, unless `indices` is empty) or, with
    /// `apply_sparse_rmsprop`, the RMSProp rule (powers untouched). Duplicate indices apply
    /// sequentially (see the module docs). Nothing is written when an error is returned.
    pub fn apply_sparse<I: SparseIndex>(
        &self,
        var: &mut [T],
        state: &mut AdamAsyncState<T>,
        grad: &[T],
        indices: &[I],
        row_len: usize,
    ) -> Result<()> {
        self.sparse_step(state, indices.len(), |c, m, v| {
            c.apply_sparse_rows(var, m, v, grad, indices, row_len, self.apply_sparse_rmsprop)
        })
    }

    /// A dense step around `kernel` (the slice or the view kernel), which gets the coefficients
    /// from `state`'s powers and the moments: the powers advance once if it succeeds.
    pub(super) fn dense_step(
        &self,
        state: &mut AdamAsyncState<T>,
        kernel: impl FnOnce(&AdamCoeffs<T>, &mut [T], &mut [T]) -> Result<()>,
    ) -> Result<()> {
        let c = self.coeffs(state)?;
        kernel(&c, &mut state.m, &mut state.v)?;
        self.advance(state);
        Ok(())
    }

    /// A sparse step of `touched` indices around `kernel`, which gets the coefficients (lazy
    /// Adam's from `state`'s powers, or RMSProp's) and the moments: lazy Adam advances the powers
    /// once if it succeeds and named a row, RMSProp leaves them.
    pub(super) fn sparse_step(
        &self,
        state: &mut AdamAsyncState<T>,
        touched: usize,
        kernel: impl FnOnce(&AdamCoeffs<T>, &mut [T], &mut [T]) -> Result<()>,
    ) -> Result<()> {
        let c = if self.apply_sparse_rmsprop {
            AdamCoeffs::new_rmsprop(self.lr, self.beta1, self.beta2, self.epsilon)?
        } else {
            self.coeffs(state)?
        };
        kernel(&c, &mut state.m, &mut state.v)?;
        if !self.apply_sparse_rmsprop && touched > 0 {
            self.advance(state);
        }
        Ok(())
    }

    fn advance(&self, state: &mut AdamAsyncState<T>) {
        advance_powers(
            &mut state.beta1_power,
            &mut state.beta2_power,
            self.beta1,
            self.beta2,
        );
    }
}

#[cfg(test)]
mod tests {
    //! Every compiled path (build target, AVX2, AVX-512F) gives the bits of the element rule
    //! applied one element at a time, for every rule and for lengths that exercise the vector
    //! tails.

    use super::*;
    use crate::optim::kernel::{
        cpu, Dense, Slices, Sparse, RULE_ADAM, RULE_NESTEROV, RULE_RMSPROP,
    };
    use crate::rng::test_values as values;
    use crate::store::ByCell;

    type Loop<T> = fn(&AdamCoeffs<T>, &mut [T], &mut [T], &mut [T], &[T]);

    fn scalar<T: Real, const RULE: u8>(
        c: &AdamCoeffs<T>,
        var: &mut [T],
        m: &mut [T],
        v: &mut [T],
        g: &[T],
    ) {
        for i in 0..var.len() {
            match RULE {
                RULE_RMSPROP => rmsprop_element(&mut var[i], &mut m[i], &mut v[i], g[i], c),
                RULE_NESTEROV => {
                    adam_async_element::<T, true>(&mut var[i], &mut m[i], &mut v[i], g[i], c)
                }
                _ => adam_async_element::<T, false>(&mut var[i], &mut m[i], &mut v[i], g[i], c),
            }
        }
    }

    /// The dense work on slices, checked.
    fn dense<'a, T: Real>(
        var: &'a mut [T],
        m: &'a mut [T],
        v: &'a mut [T],
        g: &'a [T],
    ) -> Dense<'a, Slices<'a, T>, T> {
        Dense::new(Slices { var, m, v }, g).unwrap()
    }

    fn paths<T: Real, const RULE: u8>() -> Vec<(&'static str, Loop<T>)> {
        let mut paths: Vec<(&'static str, Loop<T>)> = vec![
            ("dispatched", |c, w, m, v, g| {
                cpu::by_cpu::<T, _, RULE>(c, dense(w, m, v, g))
            }),
            ("portable", |c, w, m, v, g| {
                cpu::portable::<T, _, RULE, ByCell>(c, dense(w, m, v, g))
            }),
        ];
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                paths.push(("avx2", |c, w, m, v, g| {
                    // SAFETY: AVX2 support (which implies AVX) was detected before this path was listed.
                    unsafe { cpu::avx2::<T, _, RULE>(c, dense(w, m, v, g)) }
                }));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                paths.push(("avx512", |c, w, m, v, g| {
                    // SAFETY: AVX-512F support (which implies AVX) was detected before this path was
                    // listed.
                    unsafe { cpu::avx512::<T, _, RULE>(c, dense(w, m, v, g)) }
                }));
            }
        }
        paths
    }

    fn bits<T: Real>(xs: &[T]) -> Vec<u64> {
        xs.iter().map(|x| x.to_f64_lossy().to_bits()).collect()
    }

    fn same_bits_on_every_path<T: Real, const RULE: u8>() {
        let c = AdamCoeffs::new(
            T::from(0.01).unwrap(),
            T::from(0.9).unwrap(),
            T::from(0.99).unwrap(),
            T::from(1e-3).unwrap(),
            T::from(0.729).unwrap(),
            T::from(0.970299).unwrap(),
        )
        .unwrap();
        for n in [1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 100, 257] {
            let seed = n as u64;
            let var0 = values::<T>(seed, n, 4.0, false);
            let m0 = values::<T>(seed + 1, n, 0.2, false);
            let v0 = values::<T>(seed + 2, n, 0.05, true);
            let g = values::<T>(seed + 3, n, 1.0, false);
            let (mut w, mut m, mut v) = (var0.clone(), m0.clone(), v0.clone());
            scalar::<T, RULE>(&c, &mut w, &mut m, &mut v, &g);
            for (name, path) in paths::<T, RULE>() {
                let (mut pw, mut pm, mut pv) = (var0.clone(), m0.clone(), v0.clone());
                path(&c, &mut pw, &mut pm, &mut pv, &g);
                assert_eq!(bits(&pw), bits(&w), "{name}, rule {RULE}, n {n}: var");
                assert_eq!(bits(&pm), bits(&m), "{name}, rule {RULE}, n {n}: m");
                assert_eq!(bits(&pv), bits(&v), "{name}, rule {RULE}, n {n}: v");
            }
        }
    }

    #[test]
    fn every_cpu_path_gives_the_element_rule_bits() {
        same_bits_on_every_path::<f32, RULE_ADAM>();
        same_bits_on_every_path::<f32, RULE_NESTEROV>();
        same_bits_on_every_path::<f32, RULE_RMSPROP>();
        same_bits_on_every_path::<f64, RULE_ADAM>();
        same_bits_on_every_path::<f64, RULE_NESTEROV>();
        same_bits_on_every_path::<f64, RULE_RMSPROP>();
        same_bits_on_every_path::<half::f16, RULE_ADAM>();
        same_bits_on_every_path::<half::bf16, RULE_RMSPROP>();
    }

    #[test]
    fn sparse_paths_agree() {
        let c = AdamCoeffs::new(0.01f32, 0.9, 0.99, 1e-3, 0.9, 0.99).unwrap();
        let (rows, row_len) = (6, 19);
        let var0 = values::<f32>(1, rows * row_len, 4.0, false);
        let g = values::<f32>(2, 4 * row_len, 1.0, false);
        let indices = [4u64, 0, 4, 5];
        let run = |path: &str| {
            let (mut w, mut m, mut v) =
                (var0.clone(), vec![0.0; var0.len()], vec![0.1; var0.len()]);
            let s = Sparse::new(
                Slices {
                    var: &mut w,
                    m: &mut m,
                    v: &mut v,
                },
                &g,
                &indices,
                row_len,
            )
            .unwrap();
            match path {
                "portable" => cpu::portable::<f32, _, RULE_ADAM, ByCell>(&c, s),
                _ => cpu::by_cpu::<f32, _, RULE_ADAM>(&c, s),
            }
            .unwrap();
            (bits(&w), bits(&m), bits(&v))
        };
        assert_eq!(run("portable"), run("dispatched"));
    }
}
