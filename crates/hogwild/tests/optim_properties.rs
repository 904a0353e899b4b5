//! Properties of the optimizer kernels, checked bit for bit on many seeded random cases (the
//! crate's SplitMix64: reproducible, no extra dependency):
//! - a sparse update naming every row once equals the dense update;
//! - the powers after t non-empty calls are beta multiplied t + 1 times (they start at beta);
//! - the `Optimizer` trait path equals the AdamAsync kernel path;
//! - a lazy sparse update leaves the rows it does not name untouched;
//! - duplicate indices apply sequentially: one call with [i, i] equals two single-index calls of
//!   the row kernel with the coefficients of the first;
//! - a dense update split into shards equals the whole update.

use half::f16;
use hogwild::optim::{
    apply_dense, apply_sparse, AdamAsync, AdamAsyncState, AdamCoeffs, Real, SlotState,
};
use hogwild::rng::{unit_f64, SplitMix64};

const CASES: u64 = 200;

/// The cases' draws from one seeded stream.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(SplitMix64(seed))
    }
    fn next(&mut self) -> u64 {
        self.0.next()
    }
    /// By remainder, not `SplitMix64::below`'s multiply-shift: the cases stay the ones these
    /// properties have always been checked on.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        unit_f64(self.next())
    }
    fn vec<T: Real>(&mut self, n: usize, scale: f64) -> Vec<T> {
        (0..n)
            .map(|_| num_traits::cast((self.unit() - 0.5) * scale).unwrap())
            .collect()
    }
    /// Hyper-parameters in their usual ranges, rounded to `T`.
    fn opt<T: Real>(&mut self) -> AdamAsync<T> {
        let c = |x: f64| num_traits::cast::<f64, T>(x).unwrap();
        AdamAsync {
            lr: c(0.0001 + 0.1 * self.unit()),
            beta1: c(0.5 + 0.45 * self.unit()),
            beta2: c(0.9 + 0.09 * self.unit()),
            epsilon: c(1e-3 * self.unit()),
            use_nesterov: self.next() & 1 == 0,
            apply_sparse_rmsprop: self.next() & 1 == 0,
        }
    }
}

fn bits<T: Real>(xs: &[T]) -> Vec<u64> {
    xs.iter().map(|x| x.to_f64_lossy().to_bits()).collect()
}

fn state_bits<T: Real>(s: &AdamAsyncState<T>) -> (Vec<u64>, Vec<u64>, u64, u64) {
    (
        bits(&s.m),
        bits(&s.v),
        s.beta1_power.to_f64_lossy().to_bits(),
        s.beta2_power.to_f64_lossy().to_bits(),
    )
}

/// The trait's element-major slots `[m0, v0, m1, v1, ...]` as an `AdamAsyncState`.
fn from_slots<T: Real>(s: &SlotState<T>) -> AdamAsyncState<T> {
    AdamAsyncState {
        m: s.slots.iter().step_by(2).copied().collect(),
        v: s.slots.iter().skip(1).step_by(2).copied().collect(),
        beta1_power: s.scalars[0],
        beta2_power: s.scalars[1],
    }
}

fn sparse_all_rows_equals_dense<T: Real>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..CASES {
        let mut opt = rng.opt::<T>();
        opt.use_nesterov = false;
        opt.apply_sparse_rmsprop = false;
        let (rows, row_len) = (1 + rng.below(9), 1 + rng.below(40));
        let n = rows * row_len;
        let mut dense = rng.vec::<T>(n, 4.0);
        let mut sparse = dense.clone();
        let mut sd = AdamAsyncState::new(n, &opt);
        let mut ss = sd.clone();
        for _ in 0..3 {
            let g = rng.vec::<T>(n, 1.0);
            // Every row once, in a shuffled order, with its gradient row moved along.
            let mut order: Vec<usize> = (0..rows).collect();
            for i in (1..rows).rev() {
                order.swap(i, rng.below(i + 1));
            }
            let sg: Vec<T> = order
                .iter()
                .flat_map(|&r| g[r * row_len..(r + 1) * row_len].iter().copied())
                .collect();
            opt.apply_dense(&mut dense, &mut sd, &g).unwrap();
            opt.apply_sparse(&mut sparse, &mut ss, &sg, &order, row_len)
                .unwrap();
            assert_eq!(bits(&dense), bits(&sparse), "case {case}: var");
            assert_eq!(state_bits(&sd), state_bits(&ss), "case {case}: state");
        }
    }
}

#[test]
fn sparse_over_all_rows_equals_dense() {
    sparse_all_rows_equals_dense::<f32>(1);
    sparse_all_rows_equals_dense::<f64>(2);
    sparse_all_rows_equals_dense::<f16>(3);
}

fn powers_are_beta_to_the_t<T: Real>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..CASES {
        let opt = rng.opt::<T>();
        let mut var = rng.vec::<T>(8, 4.0);
        let mut s = AdamAsyncState::new(8, &opt);
        let (mut b1t, mut b2t) = (opt.beta1, opt.beta2);
        for _ in 0..1 + rng.below(6) {
            let g = rng.vec::<T>(8, 1.0);
            let moves_powers = match rng.below(3) {
                0 => {
                    opt.apply_dense(&mut var, &mut s, &g).unwrap();
                    true
                }
                1 => {
                    opt.apply_sparse(&mut var, &mut s, &g[..4], &[1i32], 4)
                        .unwrap();
                    !opt.apply_sparse_rmsprop
                }
                _ => {
                    opt.apply_sparse(&mut var, &mut s, &[], &[] as &[i32], 4)
                        .unwrap();
                    false
                }
            };
            if moves_powers {
                b1t = b1t * opt.beta1;
                b2t = b2t * opt.beta2;
            }
            assert_eq!(bits(&[s.beta1_power]), bits(&[b1t]), "case {case}");
            assert_eq!(bits(&[s.beta2_power]), bits(&[b2t]), "case {case}");
        }
    }
}

#[test]
fn powers_are_beta_to_the_t_bitwise() {
    powers_are_beta_to_the_t::<f32>(4);
    powers_are_beta_to_the_t::<f64>(5);
    // And numerically: 0.9 multiplied 11 times is 0.9^11 to f64 rounding.
    let opt = AdamAsync::new(0.001f64, 0.9, 0.999, 1e-8);
    let mut s = AdamAsyncState::new(1, &opt);
    let mut var = [1.0f64];
    for _ in 0..10 {
        opt.apply_dense(&mut var, &mut s, &[0.1]).unwrap();
    }
    approx::assert_relative_eq!(s.beta1_power, 0.9f64.powi(11), max_relative = 1e-14);
    approx::assert_relative_eq!(s.beta2_power, 0.999f64.powi(11), max_relative = 1e-14);
}

fn trait_path_equals_kernel_path<T: Real>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..CASES {
        let opt = rng.opt::<T>();
        let (rows, row_len) = (1 + rng.below(8), 1 + rng.below(20));
        let n = rows * row_len;
        let mut kv = rng.vec::<T>(n, 4.0);
        let mut tv = kv.clone();
        let mut ks = AdamAsyncState::new(n, &opt);
        let mut ts = SlotState::new(&opt, n);
        for call in 0..4 {
            if rng.next() & 1 == 0 {
                let g = rng.vec::<T>(n, 1.0);
                opt.apply_dense(&mut kv, &mut ks, &g).unwrap();
                apply_dense(&opt, &mut tv, &mut ts, &g).unwrap();
            } else {
                // Random rows, duplicates and empty calls included.
                let k = rng.below(2 * rows);
                let idx: Vec<i64> = (0..k).map(|_| rng.below(rows) as i64).collect();
                let g = rng.vec::<T>(k * row_len, 1.0);
                opt.apply_sparse(&mut kv, &mut ks, &g, &idx, row_len)
                    .unwrap();
                apply_sparse(&opt, &mut tv, &mut ts, &g, &idx, row_len).unwrap();
            }
            let what = format!("case {case} call {call} ({opt:?})");
            assert_eq!(bits(&kv), bits(&tv), "{what}: var");
            assert_eq!(
                state_bits(&ks),
                state_bits(&from_slots(&ts)),
                "{what}: state"
            );
        }
    }
}

#[test]
fn optimizer_trait_path_equals_kernel_path() {
    trait_path_equals_kernel_path::<f32>(6);
    trait_path_equals_kernel_path::<f64>(7);
    trait_path_equals_kernel_path::<f16>(8);
}

fn lazy_leaves_untouched_rows<T: Real>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..CASES {
        let opt = rng.opt::<T>();
        let (rows, row_len) = (2 + rng.below(8), 1 + rng.below(20));
        let n = rows * row_len;
        let mut var = rng.vec::<T>(n, 4.0);
        let mut s = AdamAsyncState::new(n, &opt);
        // Give every row non-trivial moments first.
        opt.apply_dense(&mut var, &mut s, &rng.vec::<T>(n, 1.0))
            .unwrap();
        let before = (bits(&var), bits(&s.m), bits(&s.v));
        let k = 1 + rng.below(rows - 1);
        let idx: Vec<u32> = (0..k).map(|_| rng.below(rows) as u32).collect();
        opt.apply_sparse(
            &mut var,
            &mut s,
            &rng.vec::<T>(k * row_len, 1.0),
            &idx,
            row_len,
        )
        .unwrap();
        let after = (bits(&var), bits(&s.m), bits(&s.v));
        for r in (0..rows).filter(|r| !idx.contains(&(*r as u32))) {
            let range = r * row_len..(r + 1) * row_len;
            assert_eq!(
                after.0[range.clone()],
                before.0[range.clone()],
                "case {case} row {r}"
            );
            assert_eq!(
                after.1[range.clone()],
                before.1[range.clone()],
                "case {case} row {r}"
            );
            assert_eq!(
                after.2[range.clone()],
                before.2[range],
                "case {case} row {r}"
            );
        }
    }
}

#[test]
fn lazy_sparse_leaves_untouched_rows_bit_identical() {
    lazy_leaves_untouched_rows::<f32>(9);
    lazy_leaves_untouched_rows::<f64>(10);
}

fn duplicates_apply_sequentially<T: Real>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..CASES {
        let opt = rng.opt::<T>();
        let (rows, row_len) = (1 + rng.below(5), 1 + rng.below(20));
        let n = rows * row_len;
        let var0 = rng.vec::<T>(n, 4.0);
        let s0 = AdamAsyncState::new(n, &opt);
        let row = rng.below(rows) as i64;
        let g = rng.vec::<T>(2 * row_len, 1.0);
        // One call with the row twice.
        let (mut var, mut s) = (var0.clone(), s0.clone());
        opt.apply_sparse(&mut var, &mut s, &g, &[row, row], row_len)
            .unwrap();
        // Two single-index calls of the row kernel with the first call's coefficients.
        let rms = opt.apply_sparse_rmsprop;
        let c = if rms {
            AdamCoeffs::new_rmsprop(opt.lr, opt.beta1, opt.beta2, opt.epsilon).unwrap()
        } else {
            opt.coeffs(&s0).unwrap()
        };
        let (mut var2, mut s2) = (var0.clone(), s0.clone());
        for half_g in g.chunks_exact(row_len) {
            c.apply_sparse_rows(
                &mut var2,
                &mut s2.m,
                &mut s2.v,
                half_g,
                &[row],
                row_len,
                rms,
            )
            .unwrap();
        }
        assert_eq!(bits(&var), bits(&var2), "case {case}: var");
        assert_eq!(bits(&s.m), bits(&s2.m), "case {case}: m");
        assert_eq!(bits(&s.v), bits(&s2.v), "case {case}: v");
    }
}

#[test]
fn duplicate_indices_equal_two_single_index_calls() {
    duplicates_apply_sequentially::<f32>(11);
    duplicates_apply_sequentially::<f64>(12);
}

#[test]
fn sharded_dense_equals_whole() {
    let mut rng = Rng::new(13);
    for case in 0..CASES {
        let opt = rng.opt::<f32>();
        let n = 1 + rng.below(300);
        let var0 = rng.vec::<f32>(n, 4.0);
        let g = rng.vec::<f32>(n, 1.0);
        let s0 = AdamAsyncState::new(n, &opt);
        let c = opt.coeffs(&s0).unwrap();
        let (mut whole, mut sw) = (var0.clone(), s0.clone());
        c.apply_dense_chunk(&mut whole, &mut sw.m, &mut sw.v, &g, opt.use_nesterov)
            .unwrap();
        let (mut sharded, mut ss) = (var0, s0);
        let cut = rng.below(n);
        let (w0, w1) = sharded.split_at_mut(cut);
        let (m0, m1) = ss.m.split_at_mut(cut);
        let (v0, v1) = ss.v.split_at_mut(cut);
        let (g0, g1) = g.split_at(cut);
        if cut > 0 {
            c.apply_dense_chunk(w0, m0, v0, g0, opt.use_nesterov)
                .unwrap();
        }
        c.apply_dense_chunk(w1, m1, v1, g1, opt.use_nesterov)
            .unwrap();
        assert_eq!(bits(&whole), bits(&sharded), "case {case}");
        assert_eq!(state_bits(&sw), state_bits(&ss), "case {case}");
    }
}
