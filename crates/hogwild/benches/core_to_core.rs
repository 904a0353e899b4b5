//! How much a cache line shared by two threads costs on this machine right now: the round trip
//! of a line between two threads (one writes it, the other answers). Hogwild's threads pay a
//! transfer like it on every row both update, so the benchmark scripts run this beside their
//! 2-thread runs: on a virtual machine the cost changes with where the hypervisor places the two
//! virtual cores (on this project's machine, 60-70 ns in some windows and about 300 in others).
//!
//! `cargo bench -p hogwild-train --bench core_to_core [-- MILLISECONDS]`: prints the round trip in ns
//! for each of five samples of MILLISECONDS (default 100) each, then their median.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

/// Mean ns for the line to go to the other thread and back.
fn round_trip(dur: Duration) -> f64 {
    // One value on a cache line of its own (two lines on x86-64: the adjacent-line prefetcher
    // pairs them). The two threads spin with `spin_loop` alone, never backing off, because the
    // round trip measured is the line's, and a back-off would add its own wait.
    let line = CachePadded::new(AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Answers each odd value with the next even one.
            while !stop.load(Ordering::Relaxed) {
                let v = line.load(Ordering::Acquire);
                if v % 2 == 1 {
                    line.store(v + 1, Ordering::Release);
                }
                std::hint::spin_loop();
            }
        });
        let start = Instant::now();
        let mut v = 0u64;
        while start.elapsed() < dur {
            for _ in 0..1000 {
                line.store(v + 1, Ordering::Release);
                while line.load(Ordering::Acquire) != v + 2 {
                    std::hint::spin_loop();
                }
                v += 2;
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (v / 2) as f64;
        stop.store(true, Ordering::Relaxed);
        ns
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench` (without it, as under `cargo test`, a quick 5 ms per
    // sample); a number is the sample length in ms.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ms = args.iter().find_map(|a| a.parse::<u64>().ok()).unwrap_or(
        if args.iter().any(|a| a == "--bench") {
            100
        } else {
            5
        },
    );
    let dur = Duration::from_millis(ms);
    let trips: Vec<f64> = (0..5).map(|_| round_trip(dur)).collect();
    for t in &trips {
        println!("sample: round trip {t:.0} ns");
    }
    println!("core_to_core round_trip_ns {:.0}", median(trips));
}
