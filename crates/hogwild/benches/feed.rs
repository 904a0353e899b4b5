//! Data feed throughput: MultiSlot parsing per core (ours vs a plain `split_whitespace` + `parse`
//! baseline, same data, same run), the streaming feed end to end, and the bounded channel
//! (throughput, and its peak bytes against its byte limit).
//!
//! Run: `cargo bench -p hogwild-train --bench feed` (prints a table; median of 3 runs; `cargo test --all-targets` runs a 1 MB smoke version).

use std::io::BufRead;
use std::sync::Arc;
use std::time::Instant;

use hogwild::channel::{ByteSize, Channel};
use hogwild::feed::{start_feed, Batch, DataFeedDesc, FeedOptions, LineParser};
use hogwild::rng::XorShift64;

/// `cargo bench` passes `--bench`; `cargo test --all-targets` runs this file as a quick smoke
/// test (1 MB, one run) instead.
fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn runs() -> usize {
    if full_run() {
        3
    } else {
        1
    }
}

/// IMDB-like word-id lines: 20-250 ids per review from a 100k vocabulary, skewed to small ids
/// (as frequency-ranked vocabularies are), then a 0/1 label.
fn word_id_lines(bytes: usize) -> Vec<u8> {
    let mut rng = XorShift64(0x2545_F491_4F6C_DD1D);
    let mut out = Vec::with_capacity(bytes + 4096);
    while out.len() < bytes {
        let n = 20 + rng.next() % 231;
        out.extend_from_slice(n.to_string().as_bytes());
        for _ in 0..n {
            let r = rng.next();
            // Log-uniform id in 1..100_000: mostly short numbers, like real ranked vocabularies.
            let id = (10f64.powf((r % 5000) as f64 / 1000.0)) as u64;
            out.push(b' ');
            out.extend_from_slice(id.to_string().as_bytes());
        }
        out.extend_from_slice(format!(" 1 {}\n", rng.next() % 2).as_bytes());
    }
    out
}

/// Dense float lines: 13 floats (a CTR-style dense block) and a label.
fn float_lines(bytes: usize) -> Vec<u8> {
    let mut rng = XorShift64(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(bytes + 4096);
    while out.len() < bytes {
        out.extend_from_slice(b"13");
        for _ in 0..13 {
            let v = (rng.next() % 2_000_000) as f64 / 1000.0 - 1000.0;
            out.extend_from_slice(format!(" {v}").as_bytes());
        }
        out.extend_from_slice(format!(" 1 {}\n", rng.next() % 2).as_bytes());
    }
    out
}

fn desc(kind: &str, batch_size: i32) -> DataFeedDesc {
    DataFeedDesc::from_text(&format!(
        r#"batch_size: {batch_size}
           multi_slot_desc {{
             slots {{ name: "x" type: "{kind}" is_used: true }}
             slots {{ name: "label" type: "uint64" is_used: true }}
           }}"#
    ))
    .expect("bench desc is valid")
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// CPU time of the calling thread, in seconds. The machine is shared, so per-core speed is
/// measured against the time this thread actually ran, not the wall clock.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
    // CLOCK_THREAD_CPUTIME_ID is supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// MB per CPU-second and per wall-second of `parse` over `data`, medians over the runs.
fn mb_per_s(data: &[u8], mut parse: impl FnMut(&[u8]) -> usize) -> (f64, f64, usize) {
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    let mut instances = 0;
    for _ in 0..runs() {
        let (started, cpu_started) = (Instant::now(), thread_cpu_seconds());
        instances = parse(data);
        let mb = data.len() as f64 / 1e6;
        cpu.push(mb / (thread_cpu_seconds() - cpu_started));
        wall.push(mb / started.elapsed().as_secs_f64());
    }
    (median(cpu), median(wall), instances)
}

fn ours(desc: &DataFeedDesc) -> impl FnMut(&[u8]) -> usize + '_ {
    let parser = LineParser::new(desc);
    move |data: &[u8]| {
        let batch_size = desc.batch_size() as usize;
        let mut batch = Batch::empty(desc);
        let mut instances = 0;
        // Lines are cut as the feed cuts them: `read_until` (memchr) into a reused buffer.
        let (mut rest, mut line) = (data, Vec::new());
        while rest.read_until(b'\n', &mut line).expect("in memory") > 0 {
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            parser
                .parse_into(&line, &mut batch)
                .expect("bench data is valid");
            line.clear();
            if batch.len == batch_size {
                instances += batch.len;
                batch = Batch::empty_like(&batch);
            }
        }
        instances + batch.len
    }
}

/// The obvious implementation: `str::split_whitespace` and `str::parse`, values + offsets.
fn baseline<T: std::str::FromStr + Default>(data: &[u8]) -> usize {
    let text = std::str::from_utf8(data).expect("ascii");
    let mut values: Vec<T> = Vec::new();
    let mut labels: Vec<u64> = Vec::new();
    let mut offsets = vec![0usize];
    let mut instances = 0;
    for line in text.lines() {
        let mut tokens = line.split_whitespace();
        let n: usize = tokens.next().and_then(|t| t.parse().ok()).unwrap_or(0);
        for _ in 0..n {
            values.push(
                tokens
                    .next()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or_default(),
            );
        }
        tokens.next();
        labels.push(tokens.next().and_then(|t| t.parse().ok()).unwrap_or(0));
        offsets.push(values.len());
        instances += 1;
        if offsets.len() > 64 {
            values.clear();
            labels.clear();
            offsets.truncate(1);
        }
    }
    instances
}

/// The whole streaming feed over a file: one reader thread, one worker draining its queue.
fn feed_mb_per_s(desc: &DataFeedDesc, data: &[u8]) -> (f64, f64) {
    let dir = std::env::temp_dir().join(format!("hogwild-bench-feed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("data");
    std::fs::write(&path, data).expect("write bench data");
    let mut speeds = Vec::new();
    let mut parse_speeds = Vec::new();
    for _ in 0..runs() {
        let started = Instant::now();
        let (mut queues, handle) =
            start_feed(desc, std::slice::from_ref(&path), &FeedOptions::default())
                .expect("feed starts");
        let mut n = 0;
        while let Some(batch) = queues[0].recv() {
            n += batch.len;
        }
        let stats = handle.join().expect("feed runs");
        assert_eq!(stats.instances, n as u64);
        speeds.push(data.len() as f64 / 1e6 / started.elapsed().as_secs_f64());
        parse_speeds.push(stats.parse_mb_per_sec());
    }
    let _ = std::fs::remove_dir_all(&dir);
    (median(speeds), median(parse_speeds))
}

struct Block(usize);

impl ByteSize for Block {
    fn byte_size(&self) -> usize {
        self.0
    }
}

/// Items/s through one channel with `producers` x `consumers` threads; returns (items/s, peak
/// bytes). Item sizes vary from 1 to 64 KiB.
fn channel_rate(producers: usize, consumers: usize, byte_limit: usize) -> (f64, usize) {
    let items: usize = if full_run() { 400_000 } else { 20_000 };
    let mut rates = Vec::new();
    let mut peak = 0;
    for _ in 0..runs() {
        let channel = Arc::new(Channel::new(64, byte_limit));
        let started = Instant::now();
        let consumed: usize = std::thread::scope(|s| {
            let producers: Vec<_> = (0..producers)
                .map(|p| {
                    let channel = &channel;
                    s.spawn(move || {
                        for i in 0..items / producers {
                            let size = 1 + ((p * 7919 + i * 104_729) % 65_536);
                            channel.put(Block(size)).expect("open");
                        }
                    })
                })
                .collect();
            let consumers: Vec<_> = (0..consumers)
                .map(|_| s.spawn(|| std::iter::from_fn(|| channel.get()).count()))
                .collect();
            for p in producers {
                p.join().expect("producer");
            }
            channel.close();
            consumers
                .into_iter()
                .map(|c| c.join().expect("consumer"))
                .sum()
        });
        assert_eq!(consumed, items / producers * producers);
        rates.push(items as f64 / started.elapsed().as_secs_f64());
        peak = peak.max(channel.peak_bytes());
    }
    (median(rates), peak)
}

fn main() {
    let data_mb = if full_run() { 48 } else { 1 };
    println!(
        "Data feed benchmark ({} runs, median; {data_mb} MB of generated lines)\n",
        runs()
    );
    let words = word_id_lines(data_mb << 20);
    let floats = float_lines(data_mb << 20);
    let word_desc = desc("uint64", 64);
    let float_desc = desc("float", 64);

    println!(
        "| case | ours MB/s (CPU) | baseline MB/s (CPU) | ours / baseline | ours MB/s (wall) |"
    );
    println!("|---|---:|---:|---:|---:|");
    let (o, ow, n1) = mb_per_s(&words, ours(&word_desc));
    let (b, _, n2) = mb_per_s(&words, baseline::<u64>);
    assert_eq!(n1, n2);
    println!(
        "| MultiSlot parse, word-id lines, 1 core | {o:.0} | {b:.0} | {:.2}x | {ow:.0} |",
        o / b
    );
    let (o, ow, n1) = mb_per_s(&floats, ours(&float_desc));
    let (b, _, n2) = mb_per_s(&floats, baseline::<f32>);
    assert_eq!(n1, n2);
    println!(
        "| MultiSlot parse, float lines, 1 core | {o:.0} | {b:.0} | {:.2}x | {ow:.0} |",
        o / b
    );
    let (end_to_end, parse) = feed_mb_per_s(&word_desc, &words);
    println!("| streaming feed from a file, 1 reader + 1 worker | | | | {end_to_end:.0} |");
    println!("| streaming feed, per reader-second reading + parsing | | | | {parse:.0} |");

    println!("\n| channel | items/s | peak bytes | byte limit | peak <= limit |");
    println!("|---|---:|---:|---:|---|");
    for (p, c) in [(1, 1), (4, 4)] {
        let limit = 1 << 20;
        let (rate, peak) = channel_rate(p, c, limit);
        println!(
            "| {p} producers x {c} consumers, 64 items / 1 MiB, items 1 B-64 KiB | {:.2} M | {peak} | {limit} | {} |",
            rate / 1e6,
            if peak <= limit { "yes" } else { "NO" }
        );
        assert!(
            peak <= limit,
            "channel held {peak} bytes, over its {limit}-byte limit"
        );
    }
}
