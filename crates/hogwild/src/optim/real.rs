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

    /// [`Real::adagrad_run`] on two runs, `a` and `b` (each weights, accumulators,
    /// gradients): the same bits as one run after the other.
    #[inline(always)]
    fn adagrad_pair(a: AdagradRun<'_, Self>, b: AdagradRun<'_, Self>, lr: Self, initial: Self) {
        Self::adagrad_run(a.0, a.1, a.2, lr, initial);
        Self::adagrad_run(b.0, b.1, b.2, lr, initial);
    }
}

/// One run of Adagrad's elements: weights, their accumulators and their gradients.
pub type AdagradRun<'a, T> = (&'a mut [T], &'a mut [T], &'a [T]);

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

    /// Two runs of four (a field-aware machine's pair of blocks at factor size 4) in one
    /// 8-lane instruction where the build targets AVX (`adagrad_pair_avx`). Other runs, and
    /// other builds, one after the other.
    #[inline(always)]
    fn adagrad_pair(a: AdagradRun<'_, f32>, b: AdagradRun<'_, f32>, lr: f32, initial: f32) {
        #[cfg(all(target_arch = "x86_64", target_feature = "avx", not(miri)))]
        if a.0.len() == 4 && b.0.len() == 4 {
            // SAFETY: the build targets AVX.
            return unsafe { adagrad_pair_avx(a, b, lr, initial) };
        }
        Self::adagrad_run(a.0, a.1, a.2, lr, initial);
        Self::adagrad_run(b.0, b.1, b.2, lr, initial);
    }
}

/// [`Real::adagrad_pair`] on two runs of four f32 by AVX: the square roots and divisions,
/// which bound the field-aware machine's training (two per pair of features), then take half
/// as many instructions as with four lanes, and `vsqrtps` and `vdivps` round each lane as the
/// scalar instructions do, so the bits are the element rule's.
///
/// # Safety
/// The processor supports AVX (each run is checked to be at least 4 long).
#[cfg(all(target_arch = "x86_64", not(miri), any(test, target_feature = "avx")))]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn adagrad_pair_avx(a: AdagradRun<'_, f32>, b: AdagradRun<'_, f32>, lr: f32, initial: f32) {
    use std::arch::x86_64::*;
    // Plain slicing: comparing the six lengths as arrays went through the stack.
    let (a, b) = (
        (&mut a.0[..4], &mut a.1[..4], &a.2[..4]),
        (&mut b.0[..4], &mut b.1[..4], &b.2[..4]),
    );
    // SAFETY: AVX by the contract; every load and store reads or writes the four elements of
    // one of the six slices, each 4 long (sliced above), by the unaligned forms; the weights
    // and accumulators are distinct `&mut` slices.
    unsafe {
        let (lr8, initial8) = (_mm256_set1_ps(lr), _mm256_set1_ps(initial));
        let acc = _mm256_loadu2_m128(b.1.as_ptr(), a.1.as_ptr());
        let g8 = _mm256_loadu2_m128(b.2.as_ptr(), a.2.as_ptr());
        let fresh = _mm256_cmp_ps::<_CMP_EQ_OQ>(acc, _mm256_setzero_ps());
        let x = _mm256_add_ps(
            _mm256_blendv_ps(acc, initial8, fresh),
            _mm256_mul_ps(g8, g8),
        );
        _mm256_storeu2_m128(b.1.as_mut_ptr(), a.1.as_mut_ptr(), x);
        let step = _mm256_div_ps(_mm256_mul_ps(lr8, g8), _mm256_sqrt_ps(x));
        let w8 = _mm256_loadu2_m128(b.0.as_ptr(), a.0.as_ptr());
        _mm256_storeu2_m128(b.0.as_mut_ptr(), a.0.as_mut_ptr(), _mm256_sub_ps(w8, step));
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

    /// Weights, accumulators and gradients for `n` elements: fresh (zero) accumulators among
    /// used ones, and gradients of zero, tiny and large magnitude.
    fn adagrad_case(rng: &mut SplitMix64, n: usize) -> [Vec<f32>; 3] {
        let mut draw = |scale: f32| (unit_f32(rng.next()) - 0.5) * scale;
        let w = (0..n).map(|_| draw(2.0)).collect();
        let acc = (0..n)
            .map(|i| if i % 3 == 0 { 0.0 } else { draw(4.0).abs() })
            .collect();
        let g = (0..n)
            .map(|i| match i % 4 {
                0 => 0.0,
                1 => draw(1e-20),
                2 => draw(1e6),
                _ => draw(1.0),
            })
            .collect();
        [w, acc, g]
    }

    /// Asserts that `stepped` (weights and accumulators after a packed step of `case`) holds
    /// the element rule's bits.
    fn assert_element_bits(
        opt: &Adagrad<f32>,
        case: &[Vec<f32>; 3],
        stepped: [&[f32]; 2],
        what: &str,
    ) {
        let [w, acc, g] = case;
        for i in 0..w.len() {
            let (mut wi, mut slot) = (w[i], [acc[i]]);
            opt.element(&opt.lr, &mut wi, &mut slot, g[i]);
            assert_eq!(stepped[0][i].to_bits(), wi.to_bits(), "{what}: weight {i}");
            assert_eq!(
                stepped[1][i].to_bits(),
                slot[0].to_bits(),
                "{what}: accumulator {i}"
            );
        }
    }

    // f32's packed Adagrad run gives the element rule's bits for every length (the packed
    // part and the tail); so do its pairs of runs, those of four in one 8-lane step (AVX,
    // whether or not the build targets it) and the others.
    #[test]
    fn packed_adagrad_runs_give_the_element_rules_bits() {
        let opt = Adagrad {
            lr: 0.2f32,
            initial_accumulator: 0.1,
        };
        let mut rng = SplitMix64(5);
        for n in 0..=19 {
            let case = adagrad_case(&mut rng, n);
            let (mut w, mut acc) = (case[0].clone(), case[1].clone());
            f32::adagrad_run(&mut w, &mut acc, &case[2], opt.lr, opt.initial_accumulator);
            assert_element_bits(&opt, &case, [&w, &acc], &format!("run of {n}"));
        }
        type Pair = fn(AdagradRun<'_, f32>, AdagradRun<'_, f32>, f32, f32);
        let any = vec![(4, 4), (4, 4), (0, 4), (3, 5), (8, 8), (4, 0), (1, 1)];
        type Lengths = Vec<(usize, usize)>;
        let mut pairs: Vec<(&str, Pair, Lengths)> = vec![("pair", f32::adagrad_pair, any)];
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the processor has AVX.
            let avx: Pair = |a, b, lr, initial| unsafe { adagrad_pair_avx(a, b, lr, initial) };
            pairs.push(("avx pair", avx, vec![(4, 4); 8]));
        }
        for (name, pair, lengths) in pairs {
            for (n, m) in lengths {
                let (ca, cb) = (adagrad_case(&mut rng, n), adagrad_case(&mut rng, m));
                let (mut wa, mut aa, mut wb, mut ab) =
                    (ca[0].clone(), ca[1].clone(), cb[0].clone(), cb[1].clone());
                let (a, b) = (
                    (&mut wa[..], &mut aa[..], &ca[2][..]),
                    (&mut wb[..], &mut ab[..], &cb[2][..]),
                );
                pair(a, b, opt.lr, opt.initial_accumulator);
                assert_element_bits(&opt, &ca, [&wa, &aa], &format!("{name} ({n}, {m}), first"));
                assert_element_bits(&opt, &cb, [&wb, &ab], &format!("{name} ({n}, {m}), second"));
            }
        }
    }
}
