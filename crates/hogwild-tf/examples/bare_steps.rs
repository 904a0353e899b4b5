//! The runner's bare step rate: one batch, parsed once, stepped over and over by `--threads`
//! threads through the runner's own step (`TfModel::train_slots`: the slot binding, the input
//! tensors and one `Session::run`), with no file reading or parsing. `hogwild tf-train` on the
//! same graph and files, divided by this, is what its data feed costs
//! (examples/bench_tf_runner.py prints both).
//!
//! ```sh
//! cargo run --release -p hogwild-tf --example bare_steps -- --graph build/bow.meta \
//!     --op-library build/plugin/libadam_async_ops.so --feed data.prototxt --threads 2 part-0
//! ```
//! Prints `bare steps: <instances/s> instances/s (<steps> steps of <B> instances, <T> threads)`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::Parser;
use hogwild::feed::{DataFeedDesc, FeedOptions, InMemoryDataset};
use hogwild::Model;
use hogwild_tf::{SessionConfig, TfModel};

#[derive(Parser)]
struct Args {
    /// The graph, as `tf-train --graph` takes it.
    #[arg(long)]
    graph: PathBuf,
    #[arg(long = "op-library")]
    op_libraries: Vec<PathBuf>,
    /// The data feed description; its batch_size is the batch's.
    #[arg(long)]
    feed: PathBuf,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// How long to step, after 20 warm-up steps per thread.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// The files the batch is taken from (their first batch_size instances).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let desc = DataFeedDesc::from_file(&args.feed)?;
    let data = InMemoryDataset::load(&desc, &args.files, &FeedOptions::default())?;
    let mut batch = data.empty_batch();
    let size = usize::try_from(desc.batch_size()).unwrap_or(1);
    for i in 0..size.min(data.len()) {
        data.push_to(&mut batch, i);
    }
    let config = SessionConfig {
        inter_op_threads: args.threads,
        ..SessionConfig::default()
    };
    let model = TfModel::load(&args.graph, &args.op_libraries, &config)?;
    model.graph().init()?;
    let steps = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    // Every thread warms up, then the clock starts.
    let warm = Barrier::new(args.threads + 1);
    let mut start = Instant::now();
    let mut failed = None;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..args.threads)
            .map(|_| {
                s.spawn(|| -> hogwild::Result<()> {
                    let mut out = vec![0.0; model.metric_names().len()];
                    let ready = model.worker(&desc).and_then(|mut worker| {
                        for _ in 0..20 {
                            model.train_batch(&mut worker, &batch, &mut out, None)?;
                        }
                        Ok(worker)
                    });
                    warm.wait();
                    let mut worker = ready?;
                    while !stop.load(Ordering::Relaxed) {
                        model.train_batch(&mut worker, &batch, &mut out, None)?;
                        steps.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        warm.wait();
        start = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(args.seconds));
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            if let Ok(Err(e)) = w.join() {
                failed = Some(e);
            }
        }
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    let elapsed = start.elapsed().as_secs_f64();
    let steps = steps.into_inner();
    println!(
        "bare steps: {:.0} instances/s ({steps} steps of {} instances, {} threads)",
        (steps * batch.len as u64) as f64 / elapsed,
        batch.len,
        args.threads
    );
    Ok(())
}
