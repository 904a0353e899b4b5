//! This machine's random-access limit right now: random updates of 64-byte rows of a table far
//! larger than the cache (2 GiB), per thread, with 1 and 2 threads. A hashed CTR model on a
//! table beyond the cache cannot train faster than this many rows per second divided by the
//! rows an example touches (the synthetic set of `scripts/bench_ctr.py`: 8 fields and the bias,
//! 9 rows), which is the limit its benchmark compares with. Measured on the day of a run, it
//! follows the VM's speed that day, which the fixed figure of the bench README (30-34 M rows/s
//! per thread) does not.
//!
//! Each thread updates rows of its own half of the table (so that the threads never write one
//! row: the limit, not Hogwild's collisions), every one of the row's 16 f32s, at indices from
//! a xorshift generator: independent updates, so that the processor keeps several misses in
//! flight as the training loop does with its prefetches. The table is written once before the
//! timing, so that page faults are not counted.
//!
//! `cargo bench -p hogwild-train --bench random_rows [-- MiB]`: prints rows/s per thread for 1 and 2
//! threads (median of 5 samples of 20 M updates a thread) and the implied examples/s at 9 rows
//! per example. Under `cargo test` (no `--bench`) the table is 64 MiB and the samples 200,000
//! updates.

use std::time::Instant;

use hogwild::rng::XorShift64;

/// A row of 16 f32s on a cache line of its own.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Row([f32; 16]);

/// Rows a synthetic-set example touches: 8 fields and the bias.
const ROWS_PER_EXAMPLE: f64 = 9.0;

/// Adds 1 to every element of `updates` random rows of `rows`; returns rows/s.
fn update_random(rows: &mut [Row], updates: usize, seed: u64) -> f64 {
    let n = rows.len() as u64;
    let mut rng = XorShift64(seed | 1);
    let start = Instant::now();
    for _ in 0..updates {
        let x = rng.next();
        let row = &mut rows[((u128::from(x) * u128::from(n)) >> 64) as usize];
        for v in &mut row.0 {
            *v += 1.0;
        }
    }
    updates as f64 / start.elapsed().as_secs_f64()
}

/// Rows/s of each of `threads` threads, updating their own part of `table` at once.
fn sample(table: &mut [Row], threads: usize, updates: usize, seed: u64) -> Vec<f64> {
    let part = table.len() / threads;
    std::thread::scope(|s| {
        let handles: Vec<_> = table
            .chunks_mut(part)
            .take(threads)
            .enumerate()
            .map(|(t, rows)| s.spawn(move || update_random(rows, updates, seed + t as u64)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; a number is the table size in MiB.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let mib = args
        .iter()
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(if bench { 2048 } else { 64 });
    let updates = if bench { 20_000_000 } else { 200_000 };
    let mut table = vec![Row([0.0; 16]); (mib << 20) / std::mem::size_of::<Row>()];
    println!(
        "random_rows: {} MiB table of {} rows of 64 bytes, {updates} updates a thread per sample",
        mib,
        table.len()
    );
    for threads in [1, 2] {
        let per_thread: Vec<f64> = (0..5)
            .map(|k| {
                let rates = sample(&mut table, threads, updates, 0x9E37 + 17 * k);
                rates.iter().sum::<f64>() / threads as f64
            })
            .collect();
        let samples: Vec<String> = per_thread
            .iter()
            .map(|r| format!("{:.1}", r / 1e6))
            .collect();
        let rate = median(per_thread);
        println!(
            "random_rows threads {threads}: {:.1} M rows/s per thread (samples {}), \
             {:.2} M examples/s per thread at {ROWS_PER_EXAMPLE} rows per example",
            rate / 1e6,
            samples.join(", "),
            rate / ROWS_PER_EXAMPLE / 1e6
        );
    }
    // Keeps the updates observable.
    let sum: f32 = table.iter().step_by(4099).map(|r| r.0[0]).sum();
    println!("checksum {sum}");
}
