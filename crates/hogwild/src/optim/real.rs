//! The element and index types the kernels are generic over.

use num_traits::Float;

/// A float type the optimizers compute in: f32, f64, and the half types `half::f16` and
/// `half::bf16` (whose arithmetic rounds to the half type after every operation, as TensorFlow's does).
pub trait Real: Float + Send + Sync + std::fmt::Debug + 'static {
    /// Widens to f64, for validation and error messages.
    fn to_f64_lossy(self) -> f64;

    /// Adagrad's element rule on consecutive elements (weights `w`, accumulators `acc`,
    /// gradients `g`, all as long as `w`): an accumulator of zero stands for `initial`, then
    /// `acc += g * g; w -= lr * g / sqrt(acc)` ([`super::Adagrad`]).
    #[inline(always)]
    fn adagrad_run(w: &mut [Self], acc: &mut [Self], g: &[Self], lr: Self, initial: Self) {
        adagrad_elements(w, acc, g, lr, initial);
    }
}

/// [`Real::adagrad_run`] one element at a time.
#[inline(always)]
fn adagrad_elements<T: Float>(w: &mut [T], acc: &mut [T], g: &[T], lr: T, initial: T) {
    for ((w, a), &g) in w.iter_mut().zip(acc).zip(g) {
        let start = if *a == T::zero() { initial } else { *a };
        let x = start + g * g;
        *a = x;
        *w = *w - lr * g / x.sqrt();
    }
}

impl Real for f32 {
    fn to_f64_lossy(self) -> f64 {
        self as f64
    }

    /// Four elements per instruction on x86-64 (SSE, which every x86-64 has; `sqrtps` and
    /// `divps` round as the scalar instructions do, so the bits are the element rule's), the
    /// rest one by one. Written out because the compiler packed the plain loop or not
    /// depending on the code around it: the field-aware machine's pair step (`ctr/ffm.rs`),
    /// 8 elements, ran 1.5x slower on gss when a field added to the model left it scalar.
    #[inline(always)]
    fn adagrad_run(w: &mut [f32], acc: &mut [f32], g: &[f32], lr: f32, initial: f32) {
        let n = w.len();
        let (acc, g) = (&mut acc[..n], &g[..n]);
        #[allow(unused_mut)]
        let mut done = 0;
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            use std::arch::x86_64::*;
            // SAFETY: SSE is part of every x86-64 processor, so the intrinsics are available;
            // each load and store reads or writes the four elements `done..done + 4`, within
            // the three slices, which are all `n` long (checked by the slicing above); the
            // unaligned forms are used, and `w` and `acc` are distinct `&mut` slices.
            unsafe {
                let (lr4, initial4, zero) =
                    (_mm_set1_ps(lr), _mm_set1_ps(initial), _mm_setzero_ps());
                while done + 4 <= n {
                    let a = _mm_loadu_ps(acc.as_ptr().add(done));
                    let g4 = _mm_loadu_ps(g.as_ptr().add(done));
                    let fresh = _mm_cmpeq_ps(a, zero);
                    let start = _mm_or_ps(_mm_and_ps(fresh, initial4), _mm_andnot_ps(fresh, a));
                    let x = _mm_add_ps(start, _mm_mul_ps(g4, g4));
                    _mm_storeu_ps(acc.as_mut_ptr().add(done), x);
                    let step = _mm_div_ps(_mm_mul_ps(lr4, g4), _mm_sqrt_ps(x));
                    let w4 = _mm_loadu_ps(w.as_ptr().add(done));
                    _mm_storeu_ps(w.as_mut_ptr().add(done), _mm_sub_ps(w4, step));
                    done += 4;
                }
            }
        }
        adagrad_elements(&mut w[done..], &mut acc[done..], &g[done..], lr, initial);
    }
}
impl Real for f64 {
    fn to_f64_lossy(self) -> f64 {
        self
    }
}
impl Real for half::f16 {
    fn to_f64_lossy(self) -> f64 {
        self.to_f64()
    }
}
impl Real for half::bf16 {
    fn to_f64_lossy(self) -> f64 {
        self.to_f64()
    }
}

/// An index type for sparse updates (TensorFlow's `Tindices`: int32, int64; also unsigned ids).
pub trait SparseIndex: Copy + Send + Sync {
    /// The row this index names, or `None` when it is negative or does not fit in `usize`.
    fn to_row(self) -> Option<usize>;
    /// The index as written, for error messages.
    fn as_i128(self) -> i128;
}

macro_rules! sparse_index {
    ($($t:ty),*) => {$(
        impl SparseIndex for $t {
            #[inline(always)]
            fn to_row(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
            fn as_i128(self) -> i128 {
                // Every index type fits in i128 (usize is at most 64 bits here).
                i128::try_from(self).unwrap_or(i128::MAX)
            }
        }
    )*};
}
sparse_index!(i32, i64, u32, u64, usize);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::{Adagrad, Optimizer};
    use crate::rng::{unit_f32, SplitMix64};

    // f32's packed Adagrad run gives the element rule's bits for every length (the packed
    // part and the tail), fresh (zero) accumulators among used ones, and gradients of zero,
    // tiny and large magnitude.
    #[test]
    fn packed_adagrad_runs_give_the_element_rules_bits() {
        let opt = Adagrad {
            lr: 0.2f32,
            initial_accumulator: 0.1,
        };
        let mut rng = SplitMix64(5);
        let mut draw = |scale: f32| (unit_f32(rng.next()) - 0.5) * scale;
        for n in 0..=19 {
            let w: Vec<f32> = (0..n).map(|_| draw(2.0)).collect();
            let acc: Vec<f32> = (0..n)
                .map(|i| if i % 3 == 0 { 0.0 } else { draw(4.0).abs() })
                .collect();
            let g: Vec<f32> = (0..n)
                .map(|i| match i % 4 {
                    0 => 0.0,
                    1 => draw(1e-20),
                    2 => draw(1e6),
                    _ => draw(1.0),
                })
                .collect();
            let (mut w_run, mut acc_run) = (w.clone(), acc.clone());
            f32::adagrad_run(
                &mut w_run,
                &mut acc_run,
                &g,
                opt.lr,
                opt.initial_accumulator,
            );
            for i in 0..n {
                let (mut wi, mut slot) = (w[i], [acc[i]]);
                opt.element(&opt.lr, &mut wi, &mut slot, g[i]);
                assert_eq!(w_run[i].to_bits(), wi.to_bits(), "weight {i} of {n}");
                assert_eq!(
                    acc_run[i].to_bits(),
                    slot[0].to_bits(),
                    "accumulator {i} of {n}"
                );
            }
        }
    }
}
