//! Optimizer kernels beside their memory baselines, in one run (the machine is noisy: read ratios).
//!
//! `cargo bench -p hogwild-train --bench optim` prints two tables:
//! - dense AdamAsync on 16 Mi f32 elements (reads var, m, v, grad = 16 B and writes var, m, v =
//!   12 B per element: 28 B) beside the copy baseline: a stream kernel with exactly that traffic on
//!   the same arrays (`var -= g`, `m += g`, `v += g * g`: the same 4 reads and 3 writes, no division
//!   or sqrt) compiled with the same run-time choice of AVX-512 / AVX2 / build target; then the
//!   stream compiled for the build target only (SSE2 on plain x86-64), and a `copy_from_slice` of
//!   28 B per element (14 B read, 14 B written); and the shared-memory kernel (atomic cells, what
//!   the TF plugin runs without exclusive locks) on the same arrays; GB/s at 28 B per element,
//!   median of the reps;
//! - sparse AdamAsync on a 1 Mi x 64 f32 table with 256 / 1,024 / 4,096 fresh random rows per call
//!   (ms per call, ns per row): the slice kernel, the shared-memory kernel (line copies, and cell
//!   by cell when grad does not share the tables' 16-byte alignment), and a baseline that runs the
//!   copy stream above (same 4 reads, 3 writes per element) on as many other random rows of var,
//!   m and v, prefetched in batches as the kernels prefetch theirs, and without prefetching;
//! - mixed precision (bf16 var and grad, f32 m and v: what the TF plugin runs for half variables):
//!   the slice and shared kernels, dense on the 16 Mi elements and sparse on 1,024 fresh random
//!   rows of a 1 Mi x 64 table, interleaved (ms per call).

use std::hint::black_box;
use std::time::{Duration, Instant};

use half::bf16;
use hogwild::optim::{apply_dense, as_cells, AdamAsync, AdamAsyncState, AdamCoeffs, SlotState};
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

/// `len` elements of `buf` (`len + 2` long) that do not start on a 16-byte boundary, so that the
/// shared kernel, given them beside 16-byte-aligned buffers, copies cell by cell.
fn off_16(buf: &mut [f32], len: usize) -> &mut [f32] {
    let start = if (buf.as_ptr() as usize + 4).is_multiple_of(16) {
        2
    } else {
        1
    };
    &mut buf[start..start + len]
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
        "AdamAsync apply_dense_shared (cells)",
        "same, cell by cell (grad off 16 B alignment)",
    ];
    let coeffs = AdamCoeffs::new(1e-3f32, 0.9, 0.999, 1e-8, 0.9, 0.999).unwrap();
    let mut grad_copy = grad.clone();
    // One element ahead of the rest's 16-byte alignment: the shared kernel then copies cell by
    // cell (one relaxed atomic access each) instead of a line at a time.
    let mut grad_skewed = vec![0.0f32; DENSE_LEN + 2];
    off_16(&mut grad_skewed, DENSE_LEN).copy_from_slice(&grad);
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
                5 => apply_dense(&opt, &mut var, &mut slot_state, &grad).unwrap(),
                6 => coeffs
                    .apply_dense_shared(
                        as_cells(&mut var),
                        as_cells(&mut state.m),
                        as_cells(&mut state.v),
                        as_cells(&mut grad_copy),
                        false,
                    )
                    .unwrap(),
                _ => coeffs
                    .apply_dense_shared(
                        as_cells(&mut var),
                        as_cells(&mut state.m),
                        as_cells(&mut state.v),
                        as_cells(off_16(&mut grad_skewed, DENSE_LEN)),
                        false,
                    )
                    .unwrap(),
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

/// Asks for the cache lines of `row` to be brought into L2 (the kernels' prefetch, for the
/// baseline).
fn prefetch_row(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in row.chunks(16) {
        // SAFETY: a prefetch is a hint that neither reads nor writes memory in the language's
        // sense and never faults; SSE is part of the x86-64 baseline.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                line.as_ptr().cast(),
            )
        };
    }
}

/// Batches of rows prefetched at once by the baseline: the kernels' 8 KiB of each table.
const BATCH: usize = 32;

/// `len` zeros starting on a 64-byte boundary, as TensorFlow allocates tensors (a plain `Vec`
/// of that size starts 16 bytes past a page boundary, so that every row would straddle a line).
struct Aligned {
    buf: Vec<f32>,
    start: usize,
}

impl Aligned {
    fn zeros(len: usize) -> Self {
        let mut buf = vec![0.0f32; len + 16];
        touch(&mut buf);
        let start = (64 - buf.as_ptr() as usize % 64) % 64 / 4;
        Self { buf, start }
    }

    fn get(&mut self, len: usize) -> &mut [f32] {
        &mut self.buf[self.start..self.start + len]
    }
}

fn sparse() {
    let mut rng = SplitMix64(2);
    let len = ROWS * ROW_LEN;
    let coeffs = AdamCoeffs::new(1e-3f32, 0.9, 0.999, 1e-8, 0.9, 0.999).unwrap();
    let (mut var, mut m, mut v) = (
        Aligned::zeros(len),
        Aligned::zeros(len),
        Aligned::zeros(len),
    );
    for x in var.get(len) {
        *x = centred(&mut rng);
    }
    let (var, m, v) = (var.get(len), m.get(len), v.get(len));
    println!(
        "## sparse, {ROWS} x {ROW_LEN} f32 table, fresh random rows, median of {SPARSE_CALLS} calls"
    );
    println!();
    println!(
        "| rows/call | slice kernel ms/call | ns/row | shared kernel ms/call | shared / slice | \
         shared, cell by cell | / slice | copy stream ms/call | / slice | copy, no prefetch | \
         / slice |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for touched in [256usize, 1024, 4096] {
        let mut grad_buf = Aligned::zeros(touched * ROW_LEN);
        let grad = grad_buf.get(touched * ROW_LEN);
        for g in grad.iter_mut() {
            *g = centred(&mut rng) * 0.01;
        }
        // One element past the rows' 16-byte alignment: the shared kernel then copies cell by
        // cell (one relaxed atomic access each) instead of a line at a time.
        let mut grad_skewed = vec![0.0f32; touched * ROW_LEN + 2];
        let skewed = off_16(&mut grad_skewed, touched * ROW_LEN);
        skewed.copy_from_slice(grad);
        let fresh = |rng: &mut SplitMix64| -> Vec<i64> {
            (0..touched)
                .map(|_| (rng.next() % ROWS as u64) as i64)
                .collect()
        };
        let [mut slice, mut shared, mut cellwise, mut base, mut base_np] =
            [(); 5].map(|_| Vec::new());
        for call in 0..SPARSE_CALLS {
            // Each kernel on its own fresh rows, so that none finds another's rows in cache; the
            // order rotates every call, so that none always follows the same one.
            for k in 0..5 {
                let indices = fresh(&mut rng);
                let start = Instant::now();
                match (call + k) % 5 {
                    0 => {
                        coeffs
                            .apply_sparse_rows(var, m, v, grad, &indices, ROW_LEN, false)
                            .unwrap();
                        slice.push(start.elapsed());
                    }
                    1 => {
                        coeffs
                            .apply_sparse_rows_shared(
                                as_cells(var),
                                as_cells(m),
                                as_cells(v),
                                as_cells(grad),
                                &indices,
                                ROW_LEN,
                                false,
                            )
                            .unwrap();
                        shared.push(start.elapsed());
                    }
                    2 => {
                        coeffs
                            .apply_sparse_rows_shared(
                                as_cells(var),
                                as_cells(m),
                                as_cells(v),
                                as_cells(skewed),
                                &indices,
                                ROW_LEN,
                                false,
                            )
                            .unwrap();
                        cellwise.push(start.elapsed());
                    }
                    3 => {
                        for (&row, g) in indices.iter().zip(grad.chunks_exact(ROW_LEN)) {
                            let r = row as usize * ROW_LEN..(row as usize + 1) * ROW_LEN;
                            let (w, m, v) = (&mut var[r.clone()], &mut m[r.clone()], &mut v[r]);
                            stream_dispatched(w, m, v, g);
                        }
                        base_np.push(start.elapsed());
                    }
                    _ => {
                        let batches = indices.chunks(BATCH).zip(grad.chunks(BATCH * ROW_LEN));
                        for (rows, grads) in batches {
                            for &row in rows {
                                let r = row as usize * ROW_LEN..(row as usize + 1) * ROW_LEN;
                                prefetch_row(&var[r.clone()]);
                                prefetch_row(&m[r.clone()]);
                                prefetch_row(&v[r]);
                            }
                            for (&row, g) in rows.iter().zip(grads.chunks_exact(ROW_LEN)) {
                                let r = row as usize * ROW_LEN..(row as usize + 1) * ROW_LEN;
                                let (w, m, v) = (&mut var[r.clone()], &mut m[r.clone()], &mut v[r]);
                                stream_dispatched(w, m, v, g);
                            }
                        }
                        base.push(start.elapsed());
                    }
                }
                black_box((&var, &m, &v));
            }
        }
        let ms = |t: Duration| t.as_secs_f64() * 1e3;
        let [slice, shared, cellwise, base, base_np] =
            [slice, shared, cellwise, base, base_np].map(median);
        let vs = |t: Duration| t.as_secs_f64() / slice.as_secs_f64();
        println!(
            "| {touched} | {:.3} | {:.0} | {:.3} | {:.2} | {:.3} | {:.2} | {:.3} | {:.2} | {:.3} | \
             {:.2} |",
            ms(slice),
            slice.as_secs_f64() * 1e9 / touched as f64,
            ms(shared),
            vs(shared),
            ms(cellwise),
            vs(cellwise),
            ms(base),
            vs(base),
            ms(base_np),
            vs(base_np)
        );
    }
    println!();
}

fn mixed() {
    let mut rng = SplitMix64(3);
    let coeffs = AdamCoeffs::new(1e-3f32, 0.9, 0.999, 1e-8, 0.9, 0.999).unwrap();
    let half = |rng: &mut SplitMix64, scale: f32| bf16::from_f32(centred(rng) * scale);
    let mut var: Vec<bf16> = (0..DENSE_LEN).map(|_| half(&mut rng, 1.0)).collect();
    let mut grad: Vec<bf16> = (0..DENSE_LEN).map(|_| half(&mut rng, 0.01)).collect();
    let (mut m, mut v) = (vec![0.0f32; DENSE_LEN], vec![0.0f32; DENSE_LEN]);
    touch(&mut m);
    touch(&mut v);
    let len = ROWS * ROW_LEN;
    let mut table: Vec<bf16> = (0..len).map(|_| half(&mut rng, 1.0)).collect();
    let (mut tm, mut tv) = (vec![0.0f32; len], vec![0.0f32; len]);
    touch(&mut tm);
    touch(&mut tv);
    const TOUCHED: usize = 1024;
    let mut row_grad: Vec<bf16> = (0..TOUCHED * ROW_LEN)
        .map(|_| half(&mut rng, 0.01))
        .collect();
    let names = [
        "dense apply_dense_mixed",
        "dense apply_dense_mixed_shared (cells)",
        "sparse apply_sparse_rows_mixed, 1024 rows",
        "sparse apply_sparse_rows_mixed_shared (cells), 1024 rows",
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    let kernels = names.len();
    let calls = [DENSE_REPS, DENSE_REPS, SPARSE_CALLS, SPARSE_CALLS];
    // Interleaved, the order rotated every round; the sparse kernels, much shorter, run as many
    // calls per round as their share of the reps.
    for round in 0..DENSE_REPS {
        for i in 0..kernels {
            let k = (i + round) % kernels;
            for _ in 0..calls[k] / DENSE_REPS {
                let indices: Vec<i64> = (0..TOUCHED)
                    .map(|_| (rng.next() % ROWS as u64) as i64)
                    .collect();
                let start = Instant::now();
                match k {
                    0 => coeffs.apply_dense_mixed(&mut var, &mut m, &mut v, &grad, false),
                    1 => coeffs.apply_dense_mixed_shared::<bf16>(
                        as_cells(&mut var),
                        as_cells(&mut m),
                        as_cells(&mut v),
                        as_cells(&mut grad),
                        false,
                    ),
                    2 => coeffs.apply_sparse_rows_mixed(
                        &mut table, &mut tm, &mut tv, &row_grad, &indices, ROW_LEN, false,
                    ),
                    _ => coeffs.apply_sparse_rows_mixed_shared::<bf16, i64>(
                        as_cells(&mut table),
                        as_cells(&mut tm),
                        as_cells(&mut tv),
                        as_cells(&mut row_grad),
                        &indices,
                        ROW_LEN,
                        false,
                    ),
                }
                .unwrap();
                times[k].push(start.elapsed());
                black_box((&var, &table));
            }
        }
    }
    println!("## mixed precision, bf16 var and grad, f32 m and v, median ms per call");
    println!();
    println!("| kernel | ms/call |");
    println!("|---|---:|");
    for (name, t) in names.iter().zip(times) {
        println!("| {name} | {:.3} |", median(t).as_secs_f64() * 1e3);
    }
    println!();
}

fn main() {
    dense();
    sparse();
    mixed();
}
