//! The streaming feed and the in-memory dataset end to end: batches, threads, epochs, errors.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use hogwild::executor::{Run, RunOptions};
use hogwild::feed::{
    start_feed, Batch, DataFeedDesc, ErrorPolicy, FeedMode, FeedOptions, InMemoryDataset,
    LinePrefix, SlotValues,
};
use hogwild::model::{Model, StageTimes};
use hogwild::Table;

const IMDB: &str = r#"name: "MultiSlotDataFeed"
batch_size: 2
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#;

fn imdb() -> DataFeedDesc {
    DataFeedDesc::from_text(IMDB).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Instance `i` of file `f`: words [f*1000+i, i] and label i % 2.
fn lines(f: u64, n: u64) -> String {
    (0..n)
        .map(|i| format!("2 {} {} 1 {}\n", f * 1000 + i, i, i % 2))
        .collect()
}

fn u64s(values: &SlotValues) -> &[u64] {
    match values {
        SlotValues::U64(v) => v,
        SlotValues::F32(_) => panic!("expected a uint64 slot"),
    }
}

/// Runs a feed to the end on `threads` workers; returns every instance's first word id with its
/// count, and the batch sizes seen.
fn drain(
    desc: &DataFeedDesc,
    files: &[PathBuf],
    opts: &FeedOptions,
) -> (BTreeMap<u64, usize>, Vec<usize>) {
    let (queues, handle) = start_feed(desc, files, opts).unwrap();
    let results: Vec<(Vec<u64>, Vec<usize>)> = std::thread::scope(|s| {
        let workers: Vec<_> = queues
            .into_iter()
            .map(|mut q| {
                s.spawn(move || {
                    let (mut ids, mut sizes) = (Vec::new(), Vec::new());
                    while let Some(batch) = q.recv() {
                        check_layout(&batch);
                        sizes.push(batch.len);
                        let words = &batch.slots[0];
                        ids.extend((0..batch.len).map(|i| words.u64s(i).unwrap()[0]));
                    }
                    (ids, sizes)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    handle.join().unwrap();
    let mut seen = BTreeMap::new();
    let mut sizes = Vec::new();
    for (ids, s) in results {
        for id in ids {
            *seen.entry(id).or_insert(0) += 1;
        }
        sizes.extend(s);
    }
    (seen, sizes)
}

fn check_layout(batch: &Batch) {
    for slot in &batch.slots {
        assert_eq!(slot.offsets.len(), batch.len + 1);
        assert_eq!(slot.offsets[0], 0);
        assert_eq!(*slot.offsets.last().unwrap(), slot.values.len());
    }
}

#[test]
fn imdb_sample_lines_parse_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    // The spec's sample line, then one with trailing spaces and a tab.
    let file = write(dir.path(), "part-0", "3 1234 2345 3456 1 1\n1 17 1 0 \t \n");
    let (mut queues, handle) = start_feed(&imdb(), &[file], &FeedOptions::default()).unwrap();
    let batch = queues[0].recv().unwrap();
    assert_eq!(batch.len, 2);
    assert_eq!(u64s(&batch.slots[0].values), [1234, 2345, 3456, 17]);
    assert_eq!(batch.slots[0].offsets, [0, 3, 4]);
    assert_eq!(u64s(&batch.slots[1].values), [1, 0]);
    assert_eq!(batch.slots[1].offsets, [0, 1, 2]);
    assert!(queues[0].recv().is_none());
    let stats = handle.join().unwrap();
    assert_eq!((stats.instances, stats.batches, stats.lines), (2, 1, 2));
}

#[test]
fn float_dense_and_unused_slots() {
    let desc = DataFeedDesc::from_text(
        r#"batch_size: 3
           multi_slot_desc {
             slots { name: "skip" type: "uint64" is_used: false }
             slots { name: "x" type: "float" is_dense: true is_used: true shape: -1 shape: 2 }
             slots { name: "y" type: "float" is_used: true }
           }"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "a",
        "2 5 6 2 0.5 -1.25 1 1\r\n1 9 2 3e2 .5 1 0\n",
    );
    let (mut queues, handle) = start_feed(&desc, &[file], &FeedOptions::default()).unwrap();
    let batch = queues[0].recv().unwrap();
    assert_eq!(batch.len, 2);
    assert_eq!(
        batch.slots[0].values,
        SlotValues::F32(vec![0.5, -1.25, 300.0, 0.5])
    );
    assert_eq!(batch.slots[1].values, SlotValues::F32(vec![1.0, 0.0]));
    assert!(queues[0].recv().is_none());
    handle.join().unwrap();
}

#[test]
fn batches_are_full_except_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", &lines(0, 7));
    let (seen, sizes) = drain(&imdb(), &[file], &FeedOptions::default());
    assert_eq!(sizes, [2, 2, 2, 1]);
    assert_eq!(seen.len(), 7);
}

#[test]
fn more_threads_than_files_feeds_every_worker() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", &lines(0, 400));
    let opts = FeedOptions {
        threads: 4,
        queue_batches: 2,
        ..FeedOptions::default()
    };
    let (queues, handle) = start_feed(&imdb(), &[file], &opts).unwrap();
    let counts: Vec<usize> = std::thread::scope(|s| {
        let workers: Vec<_> = queues
            .into_iter()
            .map(|mut q| {
                s.spawn(move || {
                    let mut n = 0;
                    while let Some(b) = q.recv() {
                        n += b.len;
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let stats = handle.join().unwrap();
    assert_eq!(counts.iter().sum::<usize>(), 400);
    assert!(counts.iter().all(|&n| n > 0), "idle worker: {counts:?}");
    assert_eq!(stats.instances, 400);
    assert_eq!(stats.workers, 4);
}

#[test]
fn many_files_few_threads_and_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..5)
        .map(|f| write(dir.path(), &format!("part-{f}"), &lines(f, 13)))
        .collect();
    let opts = FeedOptions {
        threads: 2,
        epochs: 3,
        ..FeedOptions::default()
    };
    let (seen, _) = drain(&imdb(), &files, &opts);
    assert_eq!(seen.len(), 65);
    assert!(seen.values().all(|&n| n == 3), "{seen:?}");
}

/// A file of several MiB is read by several readers in byte ranges: every line once per epoch,
/// and a bad line late in the file is named by its line in the file.
#[test]
fn one_large_file_is_read_in_ranges_by_several_readers() {
    let dir = tempfile::tempdir().unwrap();
    let n = 200_000u64;
    let text = lines(0, n);
    assert!(
        text.len() > 3 << 20,
        "{} bytes: too small to be split",
        text.len()
    );
    let file = write(dir.path(), "big", &text);
    let opts = FeedOptions {
        threads: 3,
        epochs: 2,
        batch_size: Some(512),
        ..FeedOptions::default()
    };
    let (seen, _) = drain(&imdb(), std::slice::from_ref(&file), &opts);
    assert_eq!(seen.len(), n as usize);
    assert!(seen.values().all(|&k| k == 2));
    let bad = write(
        dir.path(),
        "bad",
        &(text.clone() + "0 1 0\n" + &lines(0, 10)),
    );
    let (mut queues, handle) = start_feed(&imdb(), std::slice::from_ref(&bad), &opts).unwrap();
    std::thread::scope(|s| {
        for mut q in queues.drain(..) {
            s.spawn(move || while q.recv().is_some() {});
        }
    });
    assert_eq!(
        handle.join().unwrap_err().to_string(),
        format!(
            "{}:{}: slot \"words\": count 0 (every slot needs at least one value; pad it)",
            bad.display(),
            n + 1
        )
    );
}

#[test]
fn gzip_is_read_transparently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(lines(3, 9).as_bytes()).unwrap();
    gz.finish().unwrap();
    let (seen, _) = drain(&imdb(), &[path], &FeedOptions::default());
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        (3000..3009).collect::<Vec<_>>()
    );
}

/// A model that records the first word id of every instance of every batch it trains, per
/// worker; worker 0 sleeps `slow_ms` per batch.
struct Recorder {
    seen: Mutex<Vec<Vec<Vec<u64>>>>,
    made: AtomicUsize,
    slow_ms: u64,
}

impl Recorder {
    fn new(threads: usize, slow_ms: u64) -> Self {
        Recorder {
            seen: Mutex::new(vec![Vec::new(); threads]),
            made: AtomicUsize::new(0),
            slow_ms,
        }
    }

    /// Every batch's first word ids, sorted (which worker trains a batch can change between
    /// runs, the batches cannot).
    fn batches(&self) -> Vec<Vec<u64>> {
        let mut all = self.seen.lock().unwrap().concat();
        all.sort();
        all
    }
}

impl Model for Recorder {
    type Worker = usize;
    fn metrics(&self) -> Vec<String> {
        Vec::new()
    }
    fn startup(&self) {}
    fn worker(&self, _: &DataFeedDesc) -> hogwild::Result<usize> {
        Ok(self.made.fetch_add(1, Ordering::Relaxed))
    }
    fn train_batch(
        &self,
        w: &mut usize,
        b: &Batch,
        _: &mut [f64],
        _: Option<&mut StageTimes>,
    ) -> hogwild::Result<()> {
        if *w == 0 && self.slow_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(self.slow_ms));
        }
        let ids = (0..b.len).map(|i| b.slots[0].u64s(i).unwrap()[0]).collect();
        self.seen.lock().unwrap()[*w].push(ids);
        Ok(())
    }
    fn eval_batch(
        &self,
        _: &mut usize,
        _: &Batch,
        _: &mut [f64],
        _: Option<&mut String>,
    ) -> hogwild::Result<()> {
        Ok(())
    }
    fn tables(&self) -> Vec<&Table> {
        Vec::new()
    }
    fn describe(&self) -> String {
        String::new()
    }
}

fn in_memory(threads: usize, epochs: usize, shuffle: Option<u64>) -> RunOptions {
    let mut o = RunOptions {
        print_period: 0,
        ..RunOptions::default()
    };
    o.feed = FeedOptions {
        threads,
        epochs,
        mode: FeedMode::InMemory { shuffle },
        ..FeedOptions::default()
    };
    o
}

#[test]
fn in_memory_epochs_are_shuffled_reproducibly_without_reloading() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..3)
        .map(|f| write(dir.path(), &format!("p{f}"), &lines(f, 20)))
        .collect();
    let opts = in_memory(2, 2, Some(42));
    let dataset = InMemoryDataset::load(&imdb(), &files, &opts.feed).unwrap();
    assert_eq!(dataset.len(), 60);
    assert_eq!(dataset.load_stats().lines, 60);
    // Files are gone: every epoch comes from memory.
    drop(dir);
    let batches = |opts: &RunOptions| {
        let model = Recorder::new(2, 0);
        Run::new(&model, &imdb())
            .threads(2)
            .options(opts)
            .train_dataset(&dataset)
            .unwrap();
        model.batches()
    };
    let first = batches(&opts);
    assert_eq!(first, batches(&opts), "same seed, same batches");
    // 2 epochs of 60 instances (two shares of 30) in batches of the desc's size 2.
    assert_eq!(first.len(), 60);
    assert!(first.iter().all(|b| b.len() == 2));
    let mut ids: Vec<u64> = first.concat();
    ids.sort_unstable();
    let file_order: Vec<u64> = (0..3)
        .flat_map(|f| (0..20).map(move |i| f * 1000 + i))
        .collect();
    let twice: Vec<u64> = file_order.iter().flat_map(|&i| [i, i]).collect();
    assert_eq!(ids, twice, "every instance once per epoch");
    // Shuffled: some batch holds instances that are not neighbours in the files.
    assert!(first.iter().any(|b| b[1] != b[0] + 1), "shuffled");
    assert_ne!(
        first,
        batches(&in_memory(2, 2, Some(43))),
        "another seed, other batches"
    );
}

// A worker that takes 2 ms per batch trains few batches of an in-memory run: the other worker
// steals the rest of its share.
#[test]
fn in_memory_training_serves_the_faster_worker_more() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", &lines(0, 200));
    let model = Recorder::new(2, 2);
    let opts = in_memory(2, 2, Some(9));
    let r = Run::new(&model, &imdb())
        .threads(2)
        .options(&opts)
        .train(&[file])
        .unwrap();
    assert_eq!(r.instances, 400);
    let seen = model.seen.lock().unwrap().clone();
    let per_worker: Vec<Vec<u64>> = seen.iter().map(|w| w.concat()).collect();
    let mut all = per_worker.concat();
    all.sort_unstable();
    let twice: Vec<u64> = (0..200).flat_map(|i| [i, i]).collect();
    assert_eq!(all, twice, "every instance once per epoch");
    assert!(
        per_worker[1].len() > 300,
        "the fast worker trained {} of 400 instances",
        per_worker[1].len()
    );
}

#[test]
fn in_memory_through_run_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", &lines(0, 11));
    let model = Recorder::new(3, 0);
    let r = Run::new(&model, &imdb())
        .threads(3)
        .options(&in_memory(3, 2, Some(7)))
        .train(&[file])
        .unwrap();
    assert_eq!((r.instances, r.epochs.len()), (22, 2));
    let mut seen = BTreeMap::new();
    for id in model.batches().concat() {
        *seen.entry(id).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 11);
    assert!(seen.values().all(|&n| n == 2));
}

#[test]
fn strict_mode_stops_at_the_first_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad", "1 5 1 0\n1 6 1 1\n0 1 0\n1 7 1 1\n");
    let (mut queues, handle) = start_feed(
        &imdb(),
        std::slice::from_ref(&file),
        &FeedOptions::default(),
    )
    .unwrap();
    while queues[0].recv().is_some() {}
    assert_eq!(
        handle.join().unwrap_err().to_string(),
        format!(
            "{}:3: slot \"words\": count 0 (every slot needs at least one value; pad it)",
            file.display()
        )
    );
}

#[test]
fn skip_mode_counts_and_reports_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "bad",
        "1 5 1 0\nx\n1 6 1 1\n1 7 1 1 junk\n1 8 1 0\n",
    );
    let opts = FeedOptions {
        errors: ErrorPolicy::Skip {
            max_bad_lines: Some(2),
            max_bad_fraction: None,
        },
        ..FeedOptions::default()
    };
    let (seen, _) = drain(&imdb(), std::slice::from_ref(&file), &opts);
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), [5, 6, 8]);
    let (mut queues, handle) = start_feed(&imdb(), std::slice::from_ref(&file), &opts).unwrap();
    while queues[0].recv().is_some() {}
    let stats = handle.join().unwrap();
    assert_eq!(stats.bad_lines, 2);
    assert_eq!(
        stats.bad_examples,
        [
            format!(
                "{}:2: slot \"words\": count \"x\" is not a number",
                file.display()
            ),
            format!(
                "{}:4: trailing data after the last slot: \"junk\"",
                file.display()
            ),
        ]
    );
}

#[test]
fn skip_mode_stops_past_the_count_budget() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad", "1 5 1 0\nx\ny\n1 6 1 1\n");
    let opts = FeedOptions {
        errors: ErrorPolicy::Skip {
            max_bad_lines: Some(1),
            max_bad_fraction: None,
        },
        ..FeedOptions::default()
    };
    let (mut queues, handle) = start_feed(&imdb(), std::slice::from_ref(&file), &opts).unwrap();
    while queues[0].recv().is_some() {}
    assert_eq!(
        handle.join().unwrap_err().to_string(),
        format!(
            "too many bad lines: 2 of 3 lines read were bad, over the budget of 1 line; \
             first: {}:2: slot \"words\": count \"x\" is not a number",
            file.display()
        )
    );
}

#[test]
fn skip_mode_counts_a_bad_line_once_over_several_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad", "1 5 1 0\nx\n1 6 1 1\ny\n");
    let opts = FeedOptions {
        errors: ErrorPolicy::Skip {
            max_bad_lines: Some(2),
            max_bad_fraction: Some(0.5),
        },
        epochs: 3,
        ..FeedOptions::default()
    };
    // Every epoch reads both bad lines again; they are the same two lines, within the budget.
    let (seen, _) = drain(&imdb(), std::slice::from_ref(&file), &opts);
    assert_eq!(seen.values().copied().collect::<Vec<_>>(), [3, 3]);
    let (mut queues, handle) = start_feed(&imdb(), std::slice::from_ref(&file), &opts).unwrap();
    while queues[0].recv().is_some() {}
    let stats = handle.join().unwrap();
    assert_eq!((stats.bad_lines, stats.lines), (2, 12));
}

#[test]
fn skip_mode_stops_past_the_fraction_budget() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad", "1 5 1 0\n1 6 1 1\n1 7 1 1\nbad\n");
    let opts = FeedOptions {
        errors: ErrorPolicy::Skip {
            max_bad_lines: None,
            max_bad_fraction: Some(0.2),
        },
        ..FeedOptions::default()
    };
    let (mut queues, handle) = start_feed(&imdb(), std::slice::from_ref(&file), &opts).unwrap();
    while queues[0].recv().is_some() {}
    assert_eq!(
        handle.join().unwrap_err().to_string(),
        format!(
            "too many bad lines: 1 of 4 lines read were bad, over the budget of 20% of lines; \
             first: {}:4: slot \"words\": count \"bad\" is not a number",
            file.display()
        )
    );
}

#[test]
fn missing_file_is_reported_by_join() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let (mut queues, handle) = start_feed(
        &imdb(),
        std::slice::from_ref(&missing),
        &FeedOptions::default(),
    )
    .unwrap();
    assert!(queues[0].recv().is_none());
    assert_eq!(
        handle.join().unwrap_err().to_string(),
        format!(
            "{}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

#[test]
fn empty_file_list_is_an_error() {
    assert_eq!(
        start_feed(&imdb(), &[], &FeedOptions::default())
            .err()
            .unwrap()
            .to_string(),
        "data file list is empty"
    );
}

#[test]
fn stop_ends_a_run_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", &lines(0, 5000));
    let opts = FeedOptions {
        threads: 2,
        queue_batches: 1,
        epochs: 100,
        ..FeedOptions::default()
    };
    let (mut queues, handle) = start_feed(&imdb(), &[file], &opts).unwrap();
    assert!(queues[0].recv().is_some());
    handle.stop();
    assert!(queues[0].recv().is_none());
    assert!(queues[1].recv().is_none());
    let stats = handle.join().unwrap();
    assert!(stats.instances < 5000 * 100);
}

#[test]
fn a_worker_that_leaves_does_not_block_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", &lines(0, 300));
    let opts = FeedOptions {
        threads: 2,
        queue_batches: 1,
        ..FeedOptions::default()
    };
    let (mut queues, handle) = start_feed(&imdb(), &[file], &opts).unwrap();
    let mut survivor = queues.pop().unwrap();
    drop(queues);
    let mut n = 0;
    while let Some(b) = survivor.recv() {
        n += b.len;
    }
    handle.join().unwrap();
    assert!(n >= 298, "survivor got {n}");
}

#[test]
fn pipe_command_transforms_each_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", "1 5 1 0\n1 6 1 1\n");
    let mut desc = imdb();
    desc.pipe_command = Some("sed 's/^1 5 /1 50 /'".to_string());
    let (seen, _) = drain(&desc, &[file], &FeedOptions::default());
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), [6, 50]);
}

#[test]
fn failing_pipe_command_is_reported_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", "1 5 1 0\n");
    let mut desc = imdb();
    desc.pipe_command = Some("echo oops >&2; printf '1 5 1'; exit 3".to_string());
    let (mut queues, handle) =
        start_feed(&desc, std::slice::from_ref(&file), &FeedOptions::default()).unwrap();
    while queues[0].recv().is_some() {}
    assert_eq!(
        handle.join().unwrap_err().to_string(),
        format!(
            "pipe_command \"echo oops >&2; printf '1 5 1'; exit 3\" failed on {}: exit status 3; stderr: oops",
            file.display()
        )
    );
}

#[test]
fn pipe_command_killed_by_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", "1 5 1 0\n");
    let mut desc = imdb();
    desc.pipe_command = Some("printf '1 5 1 0\\n2 3'; kill -9 $$".to_string());
    let (mut queues, handle) =
        start_feed(&desc, std::slice::from_ref(&file), &FeedOptions::default()).unwrap();
    while queues[0].recv().is_some() {}
    assert_eq!(
        handle.join().unwrap_err().to_string(),
        format!(
            "pipe_command \"printf '1 5 1 0\\n2 3'; kill -9 $$\" failed on {}: killed by signal 9",
            file.display()
        )
    );
}

#[test]
fn pipe_command_that_fails_after_garbage_is_reported_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a", "1 5 1 0\n");
    let mut desc = imdb();
    desc.pipe_command = Some("echo 'No such codec'; exit 1".to_string());
    let (mut queues, handle) =
        start_feed(&desc, std::slice::from_ref(&file), &FeedOptions::default()).unwrap();
    while queues[0].recv().is_some() {}
    assert_eq!(
        handle.join().unwrap_err().to_string(),
        format!(
            "pipe_command \"echo 'No such codec'; exit 1\" failed on {}: exit status 1",
            file.display()
        )
    );
}

#[test]
fn corrupt_gzip_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(lines(0, 1000).as_bytes()).unwrap();
    let mut bytes = gz.finish().unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&path, bytes).unwrap();
    let (mut queues, handle) = start_feed(
        &imdb(),
        std::slice::from_ref(&path),
        &FeedOptions::default(),
    )
    .unwrap();
    while queues[0].recv().is_some() {}
    let message = handle.join().unwrap_err().to_string();
    assert!(
        message.starts_with(&format!("{}: ", path.display())),
        "{message}"
    );
}

#[test]
fn stats_ratios() {
    let stats = hogwild::feed::FeedStats {
        instances: 3000,
        bytes: 50_000_000,
        read_time: std::time::Duration::from_millis(250),
        worker_wait: std::time::Duration::from_millis(500),
        elapsed: std::time::Duration::from_secs(2),
        workers: 2,
        ..Default::default()
    };
    // 0.5 s waited of 2 workers x 2 s = 12.5 %; 3000 / 2 s; 50 MB / 0.25 s.
    approx::assert_relative_eq!(stats.io_percent(), 12.5);
    approx::assert_relative_eq!(stats.instances_per_sec(), 1500.0);
    approx::assert_relative_eq!(stats.parse_mb_per_sec(), 200.0);
}

#[test]
fn options_follow_the_desc() {
    let opts = FeedOptions::for_desc(&imdb());
    assert_eq!((opts.threads, opts.mode), (1, FeedMode::Stream));
    let desc = DataFeedDesc::from_text(&IMDB.replace(
        "name: \"MultiSlotDataFeed\"",
        "name: \"MultiSlotInMemoryDataFeed\" thread_num: 4",
    ))
    .unwrap();
    let opts = FeedOptions::for_desc(&desc);
    assert_eq!(
        (opts.threads, opts.mode),
        (4, FeedMode::InMemory { shuffle: Some(0) })
    );
}

#[test]
fn stress_many_files_readers_workers_epochs_with_bad_lines() {
    // 9 files of 301 lines, every 50th line bad; 4 workers, 3 readers, 4 epochs, tiny queues.
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..9)
        .map(|f| {
            let text: String = (0..301u64)
                .map(|i| {
                    if i % 50 == 49 {
                        "2 1\n".to_string()
                    } else {
                        format!("2 {} {i} 1 {}\n", f * 1000 + i, i % 2)
                    }
                })
                .collect();
            write(dir.path(), &format!("p{f}"), &text)
        })
        .collect();
    let opts = FeedOptions {
        threads: 4,
        readers: 3,
        epochs: 4,
        queue_batches: 1,
        queue_bytes: 256,
        errors: ErrorPolicy::Skip {
            max_bad_lines: None,
            max_bad_fraction: Some(0.05),
        },
        ..FeedOptions::default()
    };
    let (seen, sizes) = drain(&imdb(), &files, &opts);
    // 6 bad lines per file (i = 49, 99, ..., 299).
    assert_eq!(seen.len(), 9 * 295);
    assert!(seen.values().all(|&n| n == 4));
    assert_eq!(sizes.iter().sum::<usize>(), 9 * 295 * 4);
    // A reader sends its partial batch when it moves to the next epoch's files.
    assert!(
        sizes.iter().filter(|&&s| s < 2).count() <= 3 * 4,
        "at most one short batch per reader and epoch"
    );
}

#[test]
fn slot_record_reader_is_an_in_memory_reader() {
    let desc = DataFeedDesc::from_text(&IMDB.replace(
        "name: \"MultiSlotDataFeed\"",
        "name: \"SlotRecordInMemoryDataFeed\"",
    ))
    .unwrap();
    assert!(desc.is_in_memory());
    assert_eq!(
        FeedOptions::for_desc(&desc).mode,
        FeedMode::InMemory { shuffle: Some(0) }
    );
}

/// IMDB lines of file `f` (see [`lines`]) after Paddle's instance id, `1 id-<f>-<i>`.
fn lines_with_ids(f: u64, n: u64) -> String {
    lines(f, n)
        .lines()
        .enumerate()
        .map(|(i, l)| format!("1 id-{f}-{i} {l}\n"))
        .collect()
}

#[test]
fn instance_ids_follow_their_instances_streamed_and_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        write(dir.path(), "a", &lines_with_ids(1, 5)),
        write(dir.path(), "b", &lines_with_ids(2, 4)),
    ];
    let opts = FeedOptions {
        threads: 2,
        line_prefix: LinePrefix {
            ins_id: true,
            ..LinePrefix::default()
        },
        ..FeedOptions::default()
    };
    // Every instance's id names its file and line: words[0] is f * 1000 + i.
    let id_of = |word: u64| format!("id-{}-{}", word / 1000, word % 1000);
    let (queues, handle) = start_feed(&imdb(), &files, &opts).unwrap();
    let mut seen = 0;
    for mut queue in queues {
        while let Some(batch) = queue.recv() {
            for i in 0..batch.len {
                let word = batch.slots[0].u64s(i).unwrap()[0];
                assert_eq!(batch.ins_id(i), Some(id_of(word).as_bytes()));
                seen += 1;
            }
        }
    }
    handle.join().unwrap();
    assert_eq!(seen, 9);
    let data = InMemoryDataset::load(&imdb(), &files, &opts).unwrap();
    let mut batch = data.empty_batch();
    for i in 0..data.len() {
        data.push_to(&mut batch, i);
        let word = batch.slots[0].u64s(i).unwrap()[0];
        assert_eq!(data.ins_id(i), Some(id_of(word).as_bytes()));
        assert_eq!(batch.ins_id(i), data.ins_id(i));
    }
    // Without the prefix option the lines are not MultiSlot lines; without ids, none is kept.
    let plain = InMemoryDataset::load(&imdb(), &files, &FeedOptions::default());
    let message = plain.err().expect("the id is no count").to_string();
    assert!(
        message.ends_with(
            "a:1: slot \"words\": value 1 \"id-1-0\" is not a number (a line that starts with \
             an instance id, `1 <id>`, is read with --parse-ins-id)"
        ),
        "{message}"
    );
    let plain = write(dir.path(), "c", &lines(3, 2));
    let data = InMemoryDataset::load(&imdb(), &[plain], &FeedOptions::default()).unwrap();
    assert_eq!(data.ins_id(0), None);
}

/// A gzip file is decompressed before the pipe_command reads it (Paddle's `zcat FILE |
/// pipe_command`); what a command writes on standard error is kept once per file, and a
/// command that writes no line for a file that is not empty fails it.
#[test]
fn pipe_commands_read_decompressed_files_and_are_heard() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(format!("# header\n{}", lines(3, 9)).as_bytes())
        .unwrap();
    gz.finish().unwrap();
    let with_command = |command: &str| {
        DataFeedDesc::from_text(&format!("{IMDB}pipe_command: \"{command}\"")).unwrap()
    };
    let opts = FeedOptions {
        epochs: 2,
        ..FeedOptions::default()
    };
    let (seen, _) = drain(
        &with_command("grep -v ^#"),
        std::slice::from_ref(&path),
        &opts,
    );
    assert_eq!(seen.len(), 9);
    assert!(seen.values().all(|&n| n == 2));

    let noisy = with_command("grep -v ^#; echo careful >&2");
    let (mut queues, handle) = start_feed(&noisy, std::slice::from_ref(&path), &opts).unwrap();
    while queues[0].recv().is_some() {}
    let stats = handle.join().unwrap();
    assert_eq!(
        stats.pipe_stderr,
        [format!(
            "pipe_command \"grep -v ^#; echo careful >&2\" wrote on standard error reading {}: \
             careful",
            path.display()
        )]
    );
    let data = InMemoryDataset::load(&noisy, std::slice::from_ref(&path), &opts).unwrap();
    assert_eq!(data.load_stats().pipe_stderr.len(), 1);

    let silent = with_command("sed -n /nothing/p");
    let error = InMemoryDataset::load(&silent, std::slice::from_ref(&path), &opts)
        .err()
        .expect("no line is an error")
        .to_string();
    assert_eq!(
        error,
        format!(
            "pipe_command \"sed -n /nothing/p\" failed on {}: it wrote no line for a file that \
             is not empty (its input was the file decompressed, as Paddle's readers hand a .gz \
             file over)",
            path.display()
        )
    );
    // An empty file is no error: there was nothing to write.
    let empty = write(dir.path(), "empty", "");
    let data = InMemoryDataset::load(&silent, &[empty], &opts).unwrap();
    assert_eq!(data.len(), 0);
}
