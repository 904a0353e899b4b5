//! Optimizer kernels beside their memory baselines, in one run (the machine is noisy: read ratios).
//!
//! `cargo bench -p hogwild --bench optim` prints two tables:
//! - dense AdamAsync on 16 Mi f32 elements (reads var, m, v, grad = 16 B and writes var, m, v =
//!   12 B per element: 28 B) beside the copy baseline: a stream kernel with exactly that traffic on
//!   the same arrays (`var -= g`, `m += g`, `v += g * g`: the same 4 reads and 3 writes, no division
//!   or sqrt) compiled with the same run-time choice of AVX-512 / AVX2 / build target; then the
//!   stream compiled for the build target only (SSE2 on plain x86-64), and a `copy_from_slice` of
//!   28 B per element (14 B read, 14 B written); GB/s at 28 B per element, median of the reps;
//! - sparse AdamAsync on a 1 Mi x 64 f32 table with 256 / 1,024 / 4,096 random rows per call (ms per
//!   call, ns per row), beside a baseline that runs the copy stream above (same 4 reads, 3 writes per
//!   element) on as many random rows of var, m and v.

use std::hint::black_box;
use std::time::{Duration, Instant};

use hogwild::optim::{apply_dense, AdamAsync, AdamAsyncState, SlotState};
use hogwild::rng::{unit_f32, SplitMix64};

const DENSE_LEN: usize = 16 << 20;
const DENSE_REPS: usize = 15;
const ROWS: usize = 1 << 20;
const ROW_LEN: usize = 64;
const SPARSE_CALLS: usize = 400;

/// Uniform in [-0.5, 0.5), from the crate's seeded generator (reproducible benchmark inputs).
fn centred(rng: &mut SplitMix64) -> f32 {
    unit_f32(rng.next()) - 0.5
}

/// Writes every page of a zero-initialised (lazily mapped) buffer, so that no timed run pays the
/// first-touch page faults.
fn touch(buf: &mut [f32]) {
    for x in buf.iter_mut() {
        *x = black_box(0.0);
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / 1e9
}

/// Same traffic as the dense AdamAsync step, on the same arrays: 4 streams read, 3 written, a few
/// adds and one multiply (no division or sqrt); `v` stays non-negative, so the optimizer's inputs
/// stay ordinary numbers.
#[inline(always)]
fn stream_body(var: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32]) {
    for (((w, m), v), &g) in var.iter_mut().zip(m).zip(v).zip(grad) {
        let (old_w, old_m, old_v) = (*w, *m, *v);
        *w = old_w - g;
        *m = old_m + g;
        *v = old_v + g * g;
    }
}

/// The stream compiled for the build target only (SSE2 on plain x86-64).
#[inline(never)]
fn stream_portable(var: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32]) {
    stream_body(var, m, v, grad)
}

/// The stream compiled for AVX-512F.
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
#[target_feature(enable = "avx512f")]
unsafe fn stream_avx512(var: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32]) {
    stream_body(var, m, v, grad)
}

/// The stream compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
#[target_feature(enable = "avx2")]
unsafe fn stream_avx2(var: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32]) {
    stream_body(var, m, v, grad)
}

/// The stream with the optimizer's run-time choice of instruction set: the baseline.
fn stream_dispatched(var: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F support was detected just above.
            return unsafe { stream_avx512(var, m, v, grad) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 support was detected just above.
            return unsafe { stream_avx2(var, m, v, grad) };
        }
    }
    stream_portable(var, m, v, grad)
}

fn dense() {
    let mut rng = SplitMix64(1);
    let mut var: Vec<f32> = (0..DENSE_LEN).map(|_| centred(&mut rng)).collect();
    let grad: Vec<f32> = (0..DENSE_LEN).map(|_| centred(&mut rng) * 0.01).collect();
    let opt = AdamAsync::new(1e-3f32, 0.9, 0.999, 1e-8);
    let mut state = AdamAsyncState::new(DENSE_LEN, &opt);
    let nesterov = AdamAsync {
        use_nesterov: true,
        ..opt
    };
    let mut slot_state = SlotState::new(&opt, DENSE_LEN);
    let mut copy_src = vec![0.5f32; DENSE_LEN * 7 / 2];
    let mut copy_dst = vec![0.0f32; DENSE_LEN * 7 / 2];
    touch(&mut state.m);
    touch(&mut state.v);
    touch(&mut slot_state.slots);
    touch(&mut copy_dst);

    let names = [
        "copy: stream 4 read / 3 write",
        "copy: same, build-target SIMD only",
        "copy: copy_from_slice 28 B/elt",
        "AdamAsync apply_dense",
        "AdamAsync nesterov",
        "Optimizer trait apply_dense",
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    // Interleaved, and the order rotated every rep, so that every kernel sees the same machine
    // noise and no kernel always runs first.
    let kernels = names.len();
    for rep in 0..DENSE_REPS * kernels {
        if rep % kernels == 0 {
            std::mem::swap(&mut copy_src, &mut copy_dst);
        }
        let k = (rep + rep / kernels) % kernels;
        {
            let t = &mut times[k];
            let start = Instant::now();
            match k {
                0 => stream_dispatched(&mut var, &mut state.m, &mut state.v, &grad),
                1 => stream_portable(&mut var, &mut state.m, &mut state.v, &grad),
                2 => copy_dst.copy_from_slice(&copy_src),
                3 => opt.apply_dense(&mut var, &mut state, &grad).unwrap(),
                4 => nesterov.apply_dense(&mut var, &mut state, &grad).unwrap(),
                _ => apply_dense(&opt, &mut var, &mut slot_state, &grad).unwrap(),
            }
            t.push(start.elapsed());
            black_box((&var, &state, &copy_dst));
        }
    }
    let bytes = DENSE_LEN * 28;
    let base = median(times[0].clone());
    println!("## dense, {DENSE_LEN} f32 elements, 28 B/element, median of {DENSE_REPS} reps");
    println!();
    println!("| kernel | ms | GB/s | vs copy (first row) |");
    println!("|---|---:|---:|---:|");
    for (name, t) in names.iter().zip(times) {
        let t = median(t);
        println!(
            "| {name} | {:.2} | {:.1} | {:.2} |",
            t.as_secs_f64() * 1e3,
            gbps(bytes, t),
            base.as_secs_f64() / t.as_secs_f64()
        );
    }
    println!();
}

fn sparse() {
    let mut rng = SplitMix64(2);
    let len = ROWS * ROW_LEN;
    let mut var: Vec<f32> = (0..len).map(|_| centred(&mut rng)).collect();
    let opt = AdamAsync::new(1e-3f32, 0.9, 0.999, 1e-8);
    let mut state = AdamAsyncState::new(len, &opt);
    touch(&mut state.m);
    touch(&mut state.v);
    println!(
        "## sparse, {ROWS} x {ROW_LEN} f32 table, random rows, median of {SPARSE_CALLS} calls"
    );
    println!();
    println!(
        "| rows/call | AdamAsync ms/call | ns/row | copy stream ms/call | ns/row | copy / ours |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for touched in [256usize, 1024, 4096] {
        let grad: Vec<f32> = (0..touched * ROW_LEN)
            .map(|_| centred(&mut rng) * 0.01)
            .collect();
        let calls: Vec<Vec<i64>> = (0..SPARSE_CALLS)
            .map(|_| {
                (0..touched)
                    .map(|_| (rng.next() % ROWS as u64) as i64)
                    .collect()
            })
            .collect();
        let (mut ours, mut base) = (Vec::new(), Vec::new());
        for indices in &calls {
            let start = Instant::now();
            opt.apply_sparse(&mut var, &mut state, &grad, indices, ROW_LEN)
                .unwrap();
            ours.push(start.elapsed());
            // Baseline on fresh random rows of the same count, so neither finds the other's rows
            // in cache.
            let other: Vec<usize> = (0..touched)
                .map(|_| (rng.next() % ROWS as u64) as usize)
                .collect();
            let start = Instant::now();
            for (&row, g) in other.iter().zip(grad.chunks_exact(ROW_LEN)) {
                let r = row * ROW_LEN..(row + 1) * ROW_LEN;
                let (w, m, v) = (
                    &mut var[r.clone()],
                    &mut state.m[r.clone()],
                    &mut state.v[r],
                );
                stream_dispatched(w, m, v, g);
            }
            base.push(start.elapsed());
            black_box((&var, &state));
        }
        let (ours, base) = (median(ours), median(base));
        println!(
            "| {touched} | {:.3} | {:.0} | {:.3} | {:.0} | {:.2} |",
            ours.as_secs_f64() * 1e3,
            ours.as_secs_f64() * 1e9 / touched as f64,
            base.as_secs_f64() * 1e3,
            base.as_secs_f64() * 1e9 / touched as f64,
            base.as_secs_f64() / ours.as_secs_f64()
        );
    }
    println!();
}

fn main() {
    dense();
    sparse();
}
