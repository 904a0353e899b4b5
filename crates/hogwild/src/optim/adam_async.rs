//! AdamAsync: DeepRec's asynchronous Adam.
//!
//! Differences from stock Adam, all deliberate (see `shared/spec/adam_async.md`):
//! - each variable owns its beta powers (`beta1_power`, `beta2_power`), which start at `beta1` /
//!   `beta2` and are multiplied once per apply call, inside the update, so no global step is shared;
//! - the original form of the moment updates, `m = m * beta1 + g * (1 - beta1)` (stock TensorFlow
//!   writes `m += (g - m) * (1 - beta1)`, which reads `m` twice);
//! - sparse updates are lazy: only the named rows are touched, the powers advance once per call and
//!   not at all for an update with no indices;
//! - `apply_sparse_rmsprop` switches sparse updates to an RMSProp rule (epsilon inside the sqrt, the
//!   powers neither read nor changed).
//!
//! Duplicate indices in a sparse update are applied one after the other, in order, each seeing the
//! state the previous one left (DeepRec applies them concurrently and races). Sum duplicates first
//! for the aggregated-gradient semantics, as the Python optimizer does.

use super::{check_same_len, check_sparse, Real, SparseIndex};
use crate::{Error, Result};

/// AdamAsync's hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamAsync<T> {
    pub lr: T,
    pub beta1: T,
    pub beta2: T,
    pub epsilon: T,
    pub use_nesterov: bool,
    pub apply_sparse_rmsprop: bool,
}

/// One variable's AdamAsync state: the moments and the variable's own beta powers.
#[derive(Debug, Clone, PartialEq)]
pub struct AdamAsyncState<T> {
    pub m: Vec<T>,
    pub v: Vec<T>,
    pub beta1_power: T,
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

/// The per-call coefficients of an update, computed once from the hyper-parameters and the beta
/// powers before the step. Kernels that shard an update (the TF plugin's) compute these once, run
/// the element rule on every shard, then call [`advance_powers`] once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamCoeffs<T> {
    pub lr: T,
    /// `lr * sqrt(1 - beta2_power) / (1 - beta1_power)`
    pub alpha: T,
    pub beta1: T,
    pub one_minus_beta1: T,
    pub beta2: T,
    pub one_minus_beta2: T,
    pub epsilon: T,
}

fn check_finite<T: Real>(name: &'static str, x: T) -> Result<()> {
    if x.is_finite() {
        Ok(())
    } else {
        Err(Error::InvalidHyperParameter {
            name,
            value: x.to_f64_lossy(),
            reason: "must be finite",
        })
    }
}

fn check_unit<T: Real>(name: &'static str, x: T) -> Result<()> {
    check_finite(name, x)?;
    if x >= T::zero() && x < T::one() {
        Ok(())
    } else {
        Err(Error::InvalidHyperParameter {
            name,
            value: x.to_f64_lossy(),
            reason: "must be in [0, 1)",
        })
    }
}

impl<T: Real> AdamCoeffs<T> {
    /// Validates the hyper-parameters and powers and computes the coefficients.
    pub fn new(
        lr: T,
        beta1: T,
        beta2: T,
        epsilon: T,
        beta1_power: T,
        beta2_power: T,
    ) -> Result<Self> {
        check_finite("lr", lr)?;
        check_unit("beta1", beta1)?;
        check_unit("beta2", beta2)?;
        check_finite("epsilon", epsilon)?;
        if epsilon < T::zero() {
            return Err(Error::InvalidHyperParameter {
                name: "epsilon",
                value: epsilon.to_f64_lossy(),
                reason: "must not be negative",
            });
        }
        check_unit("beta1_power", beta1_power)?;
        check_unit("beta2_power", beta2_power)?;
        let one = T::one();
        Ok(Self {
            lr,
            alpha: lr * (one - beta2_power).sqrt() / (one - beta1_power),
            beta1,
            one_minus_beta1: one - beta1,
            beta2,
            one_minus_beta2: one - beta2,
            epsilon,
        })
    }

    /// Validates only what the RMSProp rule reads (the powers are not read).
    pub fn new_rmsprop(lr: T, beta1: T, beta2: T, epsilon: T) -> Result<Self> {
        check_finite("lr", lr)?;
        check_unit("beta1", beta1)?;
        check_unit("beta2", beta2)?;
        check_finite("epsilon", epsilon)?;
        if epsilon < T::zero() {
            return Err(Error::InvalidHyperParameter {
                name: "epsilon",
                value: epsilon.to_f64_lossy(),
                reason: "must not be negative",
            });
        }
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

    /// The dense rule over equal-length slices (no power update). Shardable: elements are independent.
    pub fn apply_dense_chunk(
        &self,
        var: &mut [T],
        m: &mut [T],
        v: &mut [T],
        grad: &[T],
        use_nesterov: bool,
    ) -> Result<()> {
        check_same_len(
            &["var", "m", "v", "grad"],
            &[var.len(), m.len(), v.len(), grad.len()],
        )?;
        if use_nesterov {
            dense_loop::<T, true>(self, var, m, v, grad);
        } else {
            dense_loop::<T, false>(self, var, m, v, grad);
        }
        Ok(())
    }

    /// The sparse rule on the rows named by `indices` (no power update): lazy Adam, or RMSProp when
    /// `rmsprop`. Rows are applied in order, so duplicates apply sequentially. Every index is
    /// validated before anything is written.
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
        check_same_len(&["var", "m", "v"], &[var.len(), m.len(), v.len()])?;
        check_sparse(var.len(), row_len, grad, indices)?;
        for (k, &index) in indices.iter().enumerate() {
            // Validated above: `index` is a row of `var`.
            let start = index.to_row().unwrap_or(0) * row_len;
            let range = start..start + row_len;
            let g = &grad[k * row_len..(k + 1) * row_len];
            let (w, mr, vr) = (
                &mut var[range.clone()],
                &mut m[range.clone()],
                &mut v[range],
            );
            if rmsprop {
                for i in 0..row_len {
                    rmsprop_element(&mut w[i], &mut mr[i], &mut vr[i], g[i], self);
                }
            } else {
                dense_loop::<T, false>(self, w, mr, vr, g);
            }
        }
        Ok(())
    }
}

#[inline(always)]
fn dense_loop<T: Real, const NESTEROV: bool>(
    c: &AdamCoeffs<T>,
    var: &mut [T],
    m: &mut [T],
    v: &mut [T],
    grad: &[T],
) {
    let n = var.len();
    let (m, v, grad) = (&mut m[..n], &mut v[..n], &grad[..n]);
    for i in 0..n {
        adam_async_element::<T, NESTEROV>(&mut var[i], &mut m[i], &mut v[i], grad[i], c);
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

    /// One dense step: every element of `var` moves, the powers advance once.
    pub fn apply_dense(
        &self,
        var: &mut [T],
        state: &mut AdamAsyncState<T>,
        grad: &[T],
    ) -> Result<()> {
        let c = self.coeffs(state)?;
        c.apply_dense_chunk(var, &mut state.m, &mut state.v, grad, self.use_nesterov)?;
        advance_powers(
            &mut state.beta1_power,
            &mut state.beta2_power,
            self.beta1,
            self.beta2,
        );
        Ok(())
    }

    /// One sparse step on a `[rows, row_len]` variable stored row-major: `grad` holds one row per
    /// entry of `indices`. Lazy Adam (powers advance once, unless `indices` is empty) or, with
    /// `apply_sparse_rmsprop`, the RMSProp rule (powers untouched).
    pub fn apply_sparse<I: SparseIndex>(
        &self,
        var: &mut [T],
        state: &mut AdamAsyncState<T>,
        grad: &[T],
        indices: &[I],
        row_len: usize,
    ) -> Result<()> {
        let c = if self.apply_sparse_rmsprop {
            AdamCoeffs::new_rmsprop(self.lr, self.beta1, self.beta2, self.epsilon)?
        } else {
            self.coeffs(state)?
        };
        c.apply_sparse_rows(
            var,
            &mut state.m,
            &mut state.v,
            grad,
            indices,
            row_len,
            self.apply_sparse_rmsprop,
        )?;
        if !self.apply_sparse_rmsprop && !indices.is_empty() {
            advance_powers(
                &mut state.beta1_power,
                &mut state.beta2_power,
                self.beta1,
                self.beta2,
            );
        }
        Ok(())
    }
}
