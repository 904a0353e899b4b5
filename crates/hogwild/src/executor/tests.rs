use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::*;
use crate::checkpoint;
use crate::feed::{Batch, DataFeedDesc, ErrorPolicy, FeedMode, InMemoryDataset};
use crate::files::Output;
use crate::metrics::Auc;
use crate::models::{Bow, BowConfig, Loss, LrSchedule, Pool};
use crate::optim::{AdamAsync, Sgd};
use crate::store::Table;

const DESC: &str = r#"
name: "MultiSlotDataFeed"
batch_size: 8
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#;

fn desc() -> DataFeedDesc {
    DataFeedDesc::from_text(DESC).unwrap()
}

fn quiet() -> RunOptions {
    RunOptions {
        print_period: 0,
        progress: Progress::Quiet,
        ..RunOptions::default()
    }
}

/// Deterministic corpus: class `c` of 3 draws most words from its own range of 10 ids out of 40.
fn write_corpus(dir: &Path, name: &str, files: usize, lines: usize, seed: u64) -> Vec<PathBuf> {
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..files)
        .map(|f| {
            let mut text = String::new();
            for _ in 0..lines {
                let label = next() % 3;
                let n = 3 + next() % 6;
                text.push_str(&n.to_string());
                for _ in 0..n {
                    let r = next();
                    let id = if r % 3 == 0 {
                        r % 40
                    } else {
                        label * 10 + (r >> 8) % 10
                    };
                    text.push_str(&format!(" {id}"));
                }
                text.push_str(&format!(" 1 {label}\n"));
            }
            let path = dir.join(format!("{name}-{f}"));
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect()
}

fn bow_cfg() -> BowConfig {
    BowConfig {
        words_slot: "words".into(),
        label_slot: "label".into(),
        vocab: 40,
        classes: 3,
        loss: Loss::Softmax,
        negative: 5,
        dim: 8,
        bigram_buckets: 64,
        subword_buckets: 0,
        pool: Pool::Mean,
        end_of_text: true,
        bias: false,
        lr_schedule: LrSchedule::Linear,
        lr_hold: 0.25,
        seed: 3,
    }
}

fn adam() -> AdamAsync<f32> {
    AdamAsync::new(0.02f32, 0.9, 0.999, 1e-8)
}

fn train_and_test(threads: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let train = write_corpus(dir.path(), "train", 4, 300, 11);
    let test = write_corpus(dir.path(), "test", 1, 300, 12);
    let model = Bow::new(bow_cfg(), adam()).unwrap();
    startup(&model);
    let mut first = 0.0;
    for epoch in 0..3 {
        let r = run_from_files(&model, &desc(), &train, threads, &[], &quiet(), None).unwrap();
        assert_eq!(r.instances, 1200);
        if epoch == 0 {
            first = r.get("loss").unwrap();
        }
    }
    let r = eval_from_files(
        &model,
        &desc(),
        &test,
        threads,
        &["accuracy"],
        &quiet(),
        None,
    )
    .unwrap();
    (first, r.get("accuracy").unwrap())
}

#[test]
fn bow_converges_on_small_data() {
    let (first_loss, acc) = train_and_test(1);
    assert!(
        first_loss < 1.0986,
        "first epoch below chance loss ln 3: {first_loss}"
    );
    assert!(acc > 0.85, "test accuracy {acc}");
}

#[test]
fn hogwild_threads_reach_single_thread_quality() {
    let (_, one) = train_and_test(1);
    let (_, three) = train_and_test(3);
    assert!(three > one - 0.03, "3 threads {three} vs 1 thread {one}");
}

fn bits(tables: &[&Table]) -> Vec<u32> {
    tables
        .iter()
        .flat_map(|t| {
            let mut v: Vec<u32> = t.elements().iter().map(|c| c.load().to_bits()).collect();
            v.extend(t.scalars().iter().map(|s| s.to_bits()));
            v
        })
        .collect()
}

#[test]
fn save_load_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_corpus(dir.path(), "a", 1, 200, 21);
    let b = write_corpus(dir.path(), "b", 1, 200, 22);
    let straight = Bow::new(bow_cfg(), adam()).unwrap();
    startup(&straight);
    run_from_files(&straight, &desc(), &a, 1, &[], &quiet(), None).unwrap();
    run_from_files(&straight, &desc(), &b, 1, &[], &quiet(), None).unwrap();

    let first = Bow::new(bow_cfg(), adam()).unwrap();
    startup(&first);
    run_from_files(&first, &desc(), &a, 1, &[], &quiet(), None).unwrap();
    let path = dir.path().join("model.ckpt");
    checkpoint::save_model(&path, &first).unwrap();
    let mut ck = checkpoint::load(&path).unwrap();
    assert_eq!(ck.meta, first.describe());
    let resumed = Bow::from_checkpoint(bow_cfg(), adam(), &mut ck).unwrap();
    assert_eq!(bits(&resumed.tables()), bits(&first.tables()));
    run_from_files(&resumed, &desc(), &b, 1, &[], &quiet(), None).unwrap();
    assert_eq!(bits(&resumed.tables()), bits(&straight.tables()));
}

#[test]
fn a_line_the_model_refuses_stops_the_run_naming_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_corpus(dir.path(), "ok", 3, 400, 31);
    // Line 123 of the second file has a word past the vocabulary: it parses, the model refuses
    // it when it trains it, shuffled among the others.
    let text = std::fs::read_to_string(&files[1]).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[122] = "2 3 99 1 0";
    std::fs::write(&files[1], lines.join("\n") + "\n").unwrap();
    let want = format!(
        "{}:123: slot \"words\": word id 99 at offset 1 is out of range (vocab = 40)",
        files[1].display()
    );
    let modes = [
        FeedMode::Stream,
        FeedMode::InMemory { shuffle: Some(5) },
        FeedMode::InMemory { shuffle: None },
    ];
    for mode in modes {
        let model = Bow::new(bow_cfg(), adam()).unwrap();
        startup(&model);
        let mut options = quiet();
        options.feed.mode = mode;
        let e = run_from_files(&model, &desc(), &files, 2, &[], &options, None).unwrap_err();
        assert_eq!(e.to_string(), want, "{mode:?}");
    }
    // Evaluation and predictions name it the same way.
    let model = Bow::new(bow_cfg(), adam()).unwrap();
    startup(&model);
    let e = eval_from_files(&model, &desc(), &files, 2, &[], &quiet(), None).unwrap_err();
    assert_eq!(e.to_string(), want);
    let mut out = Output::create(&dir.path().join("predictions")).unwrap();
    let e = eval_from_files(&model, &desc(), &files, 2, &[], &quiet(), Some(&mut out)).unwrap_err();
    assert_eq!(e.to_string(), want);
}

#[test]
fn a_refused_line_in_a_later_byte_range_of_a_large_file_is_named_by_its_line() {
    // Over 2 MiB: two readers read it as two byte ranges, streaming and loading alike; the
    // second range's lines are counted from the file's start only for the message.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large");
    let bad = 180_001;
    let text: String = (1..=200_000)
        .map(|n| match n == bad {
            true => "3 1 2 77 1 0\n".to_string(),
            false => format!(
                "3 {} {} {} 1 {}\n",
                n % 40,
                (n / 3) % 40,
                (n / 7) % 40,
                n % 3
            ),
        })
        .collect();
    assert!(text.len() > 2 << 20);
    std::fs::write(&path, text).unwrap();
    let want = format!(
        "{}:{bad}: slot \"words\": word id 77 at offset 2 is out of range (vocab = 40)",
        path.display()
    );
    for mode in [FeedMode::Stream, FeedMode::InMemory { shuffle: Some(3) }] {
        let model = Bow::new(bow_cfg(), adam()).unwrap();
        startup(&model);
        let mut options = quiet();
        options.feed.mode = mode;
        let files = [path.clone()];
        let e = run_from_files(&model, &desc(), &files, 2, &[], &options, None).unwrap_err();
        assert_eq!(e.to_string(), want, "{mode:?}");
    }
}

/// A model with no parameters that reports batch sizes, and can panic on its n-th batch.
struct Probe {
    panic_at: Option<usize>,
    seen: AtomicUsize,
}

impl Model for Probe {
    /// Collects (first word id, label is 1) pairs.
    type Worker = Auc;
    fn metrics(&self) -> Vec<String> {
        ["label", "one"].iter().map(|s| s.to_string()).collect()
    }
    fn startup(&self) {}
    fn worker(&self, _desc: &DataFeedDesc) -> Result<Auc> {
        Ok(Auc::default())
    }
    fn train_batch(
        &self,
        w: &mut Auc,
        batch: &Batch,
        out: &mut [f64],
        _stages: Option<&mut StageTimes>,
    ) -> Result<()> {
        for i in 0..batch.len {
            let first = batch.slots[0].u64s(i).unwrap()[0];
            w.push(first as f32, batch.slots[1].u64s(i).unwrap()[0] == 1);
        }
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        if self.panic_at == Some(n) {
            panic!("probe failure at batch {n}");
        }
        let labels: u64 = (0..batch.len)
            .map(|i| batch.slots[1].u64s(i).unwrap()[0])
            .sum();
        out[0] = labels as f64 / batch.len.max(1) as f64;
        out[1] = 1.0;
        Ok(())
    }
    fn eval_batch(
        &self,
        w: &mut Auc,
        batch: &Batch,
        out: &mut [f64],
        predictions: Option<&mut String>,
    ) -> Result<()> {
        if let Some(p) = predictions {
            // The instance's words, as read: predictions can be checked against the input.
            for i in 0..batch.len {
                let words: Vec<String> = batch.slots[0]
                    .u64s(i)
                    .unwrap()
                    .iter()
                    .map(u64::to_string)
                    .collect();
                p.push_str(&words.join(" "));
                p.push('\n');
            }
        }
        self.train_batch(w, batch, out, None)
    }
    fn tables(&self) -> Vec<&Table> {
        Vec::new()
    }
    fn describe(&self) -> String {
        "probe".into()
    }
    fn auc<'w>(&self, w: &'w mut Auc) -> Option<&'w mut Auc> {
        Some(w)
    }
    /// Batches seen since the previous call.
    fn run_metrics(&self) -> Vec<(&'static str, f64)> {
        vec![("batches_seen", self.seen.swap(0, Ordering::Relaxed) as f64)]
    }
}

// 3 files of 20 lines, batch size 8: however readers cut the batches (short ones at the files'
// ends), the run's mean label is the exact mean over the 60 instances, each batch's mean weighted
// by its instances.
#[test]
fn metrics_are_averaged_over_instances_of_every_batch_and_thread() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_corpus(dir.path(), "m", 3, 20, 41);
    let probe = Probe {
        panic_at: None,
        seen: AtomicUsize::new(0),
    };
    let labels: u64 = read_lines(&files).iter().map(|(_, y)| y).sum();
    for threads in [1, 3] {
        let r = run_from_files(
            &probe,
            &desc(),
            &files,
            threads,
            &["one", "label"],
            &quiet(),
            None,
        )
        .unwrap();
        assert_eq!(r.instances, 60);
        assert!(r.batches >= 8, "{} batches", r.batches);
        assert_eq!(r.fetched[0], ("one".to_string(), 1.0));
        approx::assert_relative_eq!(
            r.get("label").unwrap(),
            labels as f64 / 60.0,
            epsilon = 1e-12
        );
    }
    let e = run_from_files(&probe, &desc(), &files, 2, &["recall"], &quiet(), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown fetch \"recall\": the model reports label, one"
    );
    let r = run_from_files(&probe, &desc(), &files, 2, &["one"], &quiet(), None).unwrap();
    assert!(r.get("auc").is_none(), "auc only when fetched");
    assert_eq!(
        r.get("batches_seen"),
        Some(r.batches as f64),
        "run metrics appended"
    );
    let e = run_from_files(&probe, &desc(), &files, 0, &[], &quiet(), None).unwrap_err();
    assert!(e.to_string().contains("threads"), "{e}");
}

#[test]
fn a_panicking_worker_is_reported_and_nothing_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_corpus(dir.path(), "p", 8, 500, 51);
    let probe = Probe {
        panic_at: Some(3),
        seen: AtomicUsize::new(0),
    };
    let e = run_from_files(&probe, &desc(), &files, 2, &[], &quiet(), None).unwrap_err();
    assert!(
        e.to_string().contains("panicked: probe failure at batch 3"),
        "{e}"
    );
}

#[test]
fn predictions_are_written_one_line_per_instance() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_corpus(dir.path(), "e", 2, 30, 61);
    let model = Bow::new(bow_cfg(), Sgd { lr: 0.5f32 }).unwrap();
    startup(&model);
    let out = dir.path().join("pred.tsv");
    let mut output = Output::create(&out).unwrap();
    let r = eval_from_files(&model, &desc(), &files, 1, &[], &quiet(), Some(&mut output)).unwrap();
    output.commit().unwrap();
    assert_eq!(r.instances, 60);
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count(), 60);
    let first = text.lines().next().unwrap();
    let (class, probs) = first.split_once('\t').unwrap();
    assert!(class.parse::<usize>().unwrap() < 3);
    let sum: f32 = probs.split(' ').map(|p| p.parse::<f32>().unwrap()).sum();
    approx::assert_relative_eq!(sum, 1.0, epsilon = 1e-4);
    let e = Output::create(&dir.path().join("missing").join("p.tsv")).unwrap_err();
    assert!(e.to_string().contains("cannot create"), "{e}");
}

#[test]
fn a_desc_without_the_words_slot_is_refused() {
    let model = Bow::new(bow_cfg(), Sgd { lr: 0.5f32 }).unwrap();
    let other = DataFeedDesc::from_text(&DESC.replace("\"words\"", "\"tokens\"")).unwrap();
    let e = run_from_files(&model, &other, &[], 1, &[], &quiet(), None).unwrap_err();
    assert!(e.to_string().contains("no used slot \"words\""), "{e}");
}

#[test]
fn the_learning_rate_reaches_zero_at_the_end_of_every_run() {
    let dir = tempfile::tempdir().unwrap();
    // 3 files of 101 lines: batches of 8 leave short ones, which still count whole.
    let train = write_corpus(dir.path(), "train", 3, 101, 5);
    let data = InMemoryDataset::load(&desc(), &train, &FeedOptions::for_desc(&desc())).unwrap();
    for threads in [1, 2, 3] {
        let model = Bow::new(bow_cfg(), Sgd { lr: 0.5f32 }).unwrap();
        startup(&model);
        assert_eq!(
            model.lr_scale(),
            1.0,
            "no run planned: the optimizer's rate"
        );
        let lowest = Mutex::new(f32::MAX);
        let hook = |_: &EpochReport| -> Result<()> {
            let mut low = lowest.lock().unwrap();
            *low = low.min(model.lr_scale());
            Ok(())
        };
        let r = train_dataset(
            &model,
            &desc(),
            &data,
            threads,
            &[],
            &in_memory(4, Some(9)),
            Some(&hook),
        )
        .unwrap();
        assert_eq!(r.instances, 4 * 303);
        assert_eq!(model.lr_scale(), 0.0, "in memory, {threads} threads");
        // Every epoch ended further down the schedule, the last one at zero.
        assert_eq!(*lowest.lock().unwrap(), 0.0);
        // A second run (a resumed model) decays again from the top over its own epochs.
        let mut streaming = quiet();
        streaming.feed.epochs = 2;
        let r = run_from_files(&model, &desc(), &train, threads, &[], &streaming, None).unwrap();
        assert_eq!(r.instances, 2 * 303);
        assert_eq!(model.lr_scale(), 0.0, "streaming, {threads} threads");
    }
    // A constant schedule keeps the rate.
    let mut cfg = bow_cfg();
    cfg.lr_schedule = LrSchedule::Constant;
    let model = Bow::new(cfg, Sgd { lr: 0.5f32 }).unwrap();
    startup(&model);
    train_dataset(&model, &desc(), &data, 2, &[], &in_memory(2, Some(9)), None).unwrap();
    assert_eq!(model.lr_scale(), 1.0);
}

#[test]
fn a_decayed_run_ends_closer_to_its_training_accuracy_than_a_constant_one() {
    // At a rate too high to settle, a constant rate ends on a model no better than chance (1/3);
    // decayed to zero from the first instance (fastText's schedule), the same rate ends on a good
    // one. One thread, so that the run is the same every time (two threads' races made it fail
    // now and then).
    let dir = tempfile::tempdir().unwrap();
    let train = write_corpus(dir.path(), "train", 2, 400, 21);
    let test = write_corpus(dir.path(), "test", 1, 400, 22);
    let data = InMemoryDataset::load(&desc(), &train, &FeedOptions::for_desc(&desc())).unwrap();
    let accuracy = |schedule: LrSchedule| {
        let mut cfg = bow_cfg();
        cfg.lr_schedule = schedule;
        cfg.lr_hold = 0.0;
        let model = Bow::new(cfg, Sgd { lr: 5.0f32 }).unwrap();
        startup(&model);
        train_dataset(&model, &desc(), &data, 1, &[], &in_memory(3, Some(4)), None).unwrap();
        let r = eval_from_files(&model, &desc(), &test, 1, &["accuracy"], &quiet(), None).unwrap();
        r.get("accuracy").unwrap()
    };
    let (decayed, constant) = (accuracy(LrSchedule::Linear), accuracy(LrSchedule::Constant));
    assert!(decayed > 0.85, "decayed: test accuracy {decayed}");
    assert!(
        decayed >= constant - 0.01,
        "decayed {decayed} vs constant {constant}"
    );
    assert!(constant < 0.5, "constant: test accuracy {constant}");
}

fn in_memory(epochs: usize, seed: Option<u64>) -> RunOptions {
    let mut o = quiet();
    o.feed.epochs = epochs;
    o.feed.mode = FeedMode::InMemory { shuffle: seed };
    o
}

/// The words and labels of every line of `files`, in order.
fn read_lines(files: &[PathBuf]) -> Vec<(Vec<u64>, u64)> {
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .map(|line| {
            let v: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            let n = v[0] as usize;
            (v[1..=n].to_vec(), v[n + 2])
        })
        .collect()
}

/// The exact AUC of `pairs` by counting every (positive, negative) pair, ties one half.
fn pairwise_auc(pairs: &[(f32, bool)]) -> f64 {
    let (mut wins, mut n) = (0.0, 0.0);
    for p in pairs.iter().filter(|p| p.1) {
        for q in pairs.iter().filter(|q| !q.1) {
            n += 1.0;
            wins += if p.0 > q.0 {
                1.0
            } else if p.0 == q.0 {
                0.5
            } else {
                0.0
            };
        }
    }
    wins / n
}

#[test]
fn in_memory_training_runs_every_epoch_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let train = write_corpus(dir.path(), "train", 4, 300, 11);
    let test = write_corpus(dir.path(), "test", 1, 300, 12);
    let model = Bow::new(bow_cfg(), adam()).unwrap();
    startup(&model);
    let seen = Mutex::new(Vec::new());
    let hook = |e: &EpochReport| {
        seen.lock().unwrap().push((e.epoch, e.instances));
        Ok(())
    };
    let r = run_from_files(
        &model,
        &desc(),
        &train,
        3,
        &[],
        &in_memory(3, Some(5)),
        None,
    )
    .unwrap();
    assert_eq!(r.instances, 3600);
    assert_eq!(r.epochs.len(), 3);
    assert!(r.epochs[2].get("loss").unwrap() < r.epochs[0].get("loss").unwrap());
    assert_eq!(r.feed.lines, 1200);
    assert!(r.data_bytes > 0);
    let acc = eval_from_files(&model, &desc(), &test, 2, &["accuracy"], &quiet(), None)
        .unwrap()
        .get("accuracy")
        .unwrap();
    assert!(acc > 0.85, "test accuracy {acc}");
    let data = InMemoryDataset::load(&desc(), &train, &FeedOptions::default()).unwrap();
    train_dataset(
        &model,
        &desc(),
        &data,
        2,
        &[],
        &in_memory(2, None),
        Some(&hook),
    )
    .unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(1, 1200), (2, 1200)]);
}

#[test]
fn in_memory_training_is_reproducible_with_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let train = write_corpus(dir.path(), "train", 2, 200, 71);
    let run = |seed| {
        let model = Bow::new(bow_cfg(), adam()).unwrap();
        startup(&model);
        run_from_files(&model, &desc(), &train, 1, &[], &in_memory(2, seed), None).unwrap();
        bits(&model.tables())
    };
    assert_eq!(run(Some(1)), run(Some(1)));
    assert_ne!(run(Some(1)), run(Some(2)));
}

#[test]
fn an_epoch_hook_error_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let train = write_corpus(dir.path(), "train", 1, 100, 81);
    let model = Bow::new(bow_cfg(), adam()).unwrap();
    startup(&model);
    let data = InMemoryDataset::load(&desc(), &train, &FeedOptions::default()).unwrap();
    let hook = |_: &EpochReport| {
        Err(Error::Io {
            path: "model.ckpt".into(),
            message: "disk full".into(),
        })
    };
    let e = train_dataset(
        &model,
        &desc(),
        &data,
        2,
        &[],
        &in_memory(5, Some(1)),
        Some(&hook),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("model.ckpt: disk full"), "{e}");
}

#[test]
fn predictions_follow_the_input_order_with_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_corpus(dir.path(), "o", 3, 250, 91);
    let probe = Probe {
        panic_at: None,
        seen: AtomicUsize::new(0),
    };
    let out = dir.path().join("pred.txt");
    let mut output = Output::create(&out).unwrap();
    let r = eval_from_files(&probe, &desc(), &files, 3, &[], &quiet(), Some(&mut output)).unwrap();
    output.commit().unwrap();
    assert_eq!(r.instances, 750);
    let expected: Vec<String> = read_lines(&files)
        .iter()
        .map(|(w, _)| w.iter().map(u64::to_string).collect::<Vec<_>>().join(" "))
        .collect();
    let got: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn skipped_lines_keep_predictions_aligned_with_the_input() {
    let dir = tempfile::tempdir().unwrap();
    // Bad lines first, in runs, last, and a file of bad lines only.
    let layouts: [(usize, &[usize]); 4] = [
        (30, &[1, 7, 8, 30]),
        (3, &[1, 2, 3]),
        (20, &[19, 20]),
        (5, &[]),
    ];
    let mut files = Vec::new();
    let mut want = Vec::new();
    for (f, (lines, bad)) in layouts.iter().enumerate() {
        let mut text = String::new();
        for n in 1..=*lines {
            if bad.contains(&n) {
                text += "1 x 1 0\n";
                want.push(String::new());
            } else {
                let id = f * 100 + n;
                text += &format!("1 {id} 1 0\n");
                want.push(id.to_string());
            }
        }
        let path = dir.path().join(format!("f{f}"));
        std::fs::write(&path, text).unwrap();
        files.push(path);
    }
    let probe = Probe {
        panic_at: None,
        seen: AtomicUsize::new(0),
    };
    let mut options = quiet();
    options.feed.batch_size = Some(4);
    options.feed.errors = ErrorPolicy::Skip {
        max_bad_lines: Some(9),
        max_bad_fraction: None,
    };
    let out = dir.path().join("pred.txt");
    let mut output = Output::create(&out).unwrap();
    let r = eval_from_files(&probe, &desc(), &files, 3, &[], &options, Some(&mut output)).unwrap();
    output.commit().unwrap();
    assert_eq!((r.instances, r.feed.bad_lines, r.feed.lines), (49, 9, 58));
    let got: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, want);
    // The budget holds over the files together: 8 bad lines are within it in every file but
    // not in all of them.
    options.feed.errors = ErrorPolicy::Skip {
        max_bad_lines: Some(8),
        max_bad_fraction: None,
    };
    let mut output = Output::create(&out).unwrap();
    let e = eval_from_files(&probe, &desc(), &files, 3, &[], &options, Some(&mut output));
    let e = e.unwrap_err();
    assert!(
        e.to_string().starts_with(
            "too many bad lines: 9 of 53 lines read were bad, over the budget of 8 lines; first: "
        ),
        "{e}"
    );
}

#[test]
fn auc_is_exact_over_all_threads() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_corpus(dir.path(), "a", 3, 200, 101);
    let pairs: Vec<(f32, bool)> = read_lines(&files)
        .iter()
        .map(|(w, y)| (w[0] as f32, *y == 1))
        .collect();
    let expected = pairwise_auc(&pairs);
    let probe = || Probe {
        panic_at: None,
        seen: AtomicUsize::new(0),
    };
    let r = eval_from_files(&probe(), &desc(), &files, 3, &["auc"], &quiet(), None).unwrap();
    assert_eq!(r.fetched[0].0, "auc");
    approx::assert_relative_eq!(r.get("auc").unwrap(), expected, epsilon = 1e-12);
    assert_eq!(r.get("batches_seen"), Some(r.batches as f64));
    let r = run_from_files(
        &probe(),
        &desc(),
        &files,
        2,
        &[],
        &in_memory(2, Some(3)),
        None,
    )
    .unwrap();
    approx::assert_relative_eq!(r.epochs[0].get("auc").unwrap(), expected, epsilon = 1e-12);
    approx::assert_relative_eq!(r.get("auc").unwrap(), expected, epsilon = 1e-12);
}

// 3 files of 20 lines, batch size 8. One thread trains ceil(60 / 8) = 8 batches an epoch; two
// threads share 30 instances each, ceil(30 / 8) = 4 batches apiece, 8 an epoch as well.
#[test]
fn epoch_reports_carry_the_run_metrics_of_their_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_corpus(dir.path(), "e", 3, 20, 111);
    let probe = || Probe {
        panic_at: None,
        seen: AtomicUsize::new(0),
    };
    let seen = |r: &RunReport| -> Vec<f64> {
        r.epochs
            .iter()
            .map(|e| e.get("batches_seen").unwrap())
            .collect()
    };
    let r = run_from_files(
        &probe(),
        &desc(),
        &files,
        1,
        &[],
        &in_memory(3, Some(4)),
        None,
    )
    .unwrap();
    assert_eq!(seen(&r), vec![8.0, 8.0, 8.0]);
    assert_eq!(r.get("batches_seen"), Some(24.0), "the run's is the sum");

    // With two threads an epoch's value is read when its last worker ends it: by then every
    // batch of the epoch is counted, and perhaps some of the next epoch's.
    let r = run_from_files(
        &probe(),
        &desc(),
        &files,
        2,
        &[],
        &in_memory(3, Some(4)),
        None,
    )
    .unwrap();
    assert_eq!(r.batches, 24);
    let per_epoch = seen(&r);
    let mut so_far = 0.0;
    for (k, v) in per_epoch.iter().enumerate() {
        so_far += v;
        assert!(so_far >= 8.0 * (k + 1) as f64, "epochs {per_epoch:?}");
    }
    assert_eq!(so_far, 24.0, "epochs {per_epoch:?}");
    assert_eq!(r.get("batches_seen"), Some(24.0));

    // The hook sees them too.
    let data = InMemoryDataset::load(&desc(), &files, &FeedOptions::default()).unwrap();
    let hooked = Mutex::new(Vec::new());
    let hook = |e: &EpochReport| {
        hooked.lock().unwrap().push(e.get("batches_seen"));
        Ok(())
    };
    train_dataset(
        &probe(),
        &desc(),
        &data,
        1,
        &[],
        &in_memory(2, None),
        Some(&hook),
    )
    .unwrap();
    assert_eq!(*hooked.lock().unwrap(), vec![Some(8.0), Some(8.0)]);
}

/// A model with no parameters whose first worker can be slow: it counts the batches each
/// worker trains and how often each instance (named by its first word) was trained, and keeps
/// every batch's instances.
struct Lopsided {
    workers: AtomicUsize,
    /// Sleep per batch of worker 0.
    slow: std::time::Duration,
    /// Per worker, the batches it trained.
    trained: Vec<AtomicUsize>,
    /// Per instance, the times it was trained.
    seen: Vec<AtomicUsize>,
    /// Every batch's instances, in training order.
    batches: Mutex<Vec<Vec<u64>>>,
}

impl Lopsided {
    fn new(threads: usize, instances: usize, slow_ms: u64) -> Self {
        Self {
            workers: AtomicUsize::new(0),
            slow: std::time::Duration::from_millis(slow_ms),
            trained: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
            seen: (0..instances).map(|_| AtomicUsize::new(0)).collect(),
            batches: Mutex::new(Vec::new()),
        }
    }
}

impl Model for Lopsided {
    /// The worker's index.
    type Worker = usize;
    fn metrics(&self) -> Vec<String> {
        ["size"].iter().map(|s| s.to_string()).collect()
    }
    fn startup(&self) {}
    fn worker(&self, _desc: &DataFeedDesc) -> Result<usize> {
        Ok(self.workers.fetch_add(1, Ordering::Relaxed))
    }
    fn train_batch(
        &self,
        w: &mut usize,
        batch: &Batch,
        out: &mut [f64],
        _stages: Option<&mut StageTimes>,
    ) -> Result<()> {
        if *w == 0 {
            std::thread::sleep(self.slow);
        }
        let ids: Vec<u64> = (0..batch.len)
            .map(|i| batch.slots[0].u64s(i).unwrap()[0])
            .collect();
        for &id in &ids {
            self.seen[id as usize].fetch_add(1, Ordering::Relaxed);
        }
        self.batches.lock().unwrap().push(ids);
        self.trained[*w].fetch_add(1, Ordering::Relaxed);
        out[0] = batch.len as f64;
        Ok(())
    }
    fn eval_batch(
        &self,
        w: &mut usize,
        batch: &Batch,
        out: &mut [f64],
        _predictions: Option<&mut String>,
    ) -> Result<()> {
        self.train_batch(w, batch, out, None)
    }
    fn tables(&self) -> Vec<&Table> {
        Vec::new()
    }
    fn describe(&self) -> String {
        "lopsided".into()
    }
}

/// A file of `n` instances whose first word is their line number.
fn numbered_file(dir: &Path, n: usize) -> PathBuf {
    let text: String = (0..n).map(|i| format!("2 {i} 7 1 {}\n", i % 2)).collect();
    let path = dir.join("numbered");
    std::fs::write(&path, text).unwrap();
    path
}

/// `n` instances whose first word is their line number.
fn numbered_data(dir: &Path, n: usize) -> InMemoryDataset {
    let path = numbered_file(dir, n);
    InMemoryDataset::load(&desc(), &[path], &FeedOptions::default()).unwrap()
}

/// The batches each of `model`'s workers trained.
fn trained(model: &Lopsided) -> Vec<usize> {
    model
        .trained
        .iter()
        .map(|t| t.load(Ordering::Relaxed))
        .collect()
}

// Streaming from a file with queues long enough to take the whole file, which a reader fills in
// turn: worker 0 (2 ms a batch) gets half of the batches, and worker 1 trains most of them from
// its queue once its own is empty. Every instance is trained once per epoch.
#[test]
fn streaming_workers_take_the_batches_queued_for_a_slow_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = numbered_file(dir.path(), 200);
    let model = Lopsided::new(2, 200, 2);
    let mut options = quiet();
    options.feed.epochs = 2;
    options.feed.queue_batches = 100;
    let r = run_from_files(&model, &desc(), &[file], 2, &[], &options, None).unwrap();
    assert_eq!(r.instances, 400);
    assert!(model.seen.iter().all(|s| s.load(Ordering::Relaxed) == 2));
    let trained = trained(&model);
    assert_eq!(trained.iter().sum::<usize>(), 2 * 25);
    assert!(
        trained[1] > 25 + 12,
        "the fast worker trained {trained:?} batches"
    );
}

// Worker 0 sleeps 2 ms per batch, worker 1 not at all: worker 1 ends its own 2 x 13 batches at
// once and trains most of worker 0's, and still every epoch trains every instance once.
#[test]
fn idle_workers_train_the_batches_of_a_slow_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = numbered_data(dir.path(), 200);
    let model = Lopsided::new(2, 200, 2);
    let epochs = Mutex::new(Vec::new());
    let hook = |e: &EpochReport| {
        epochs.lock().unwrap().push((e.epoch, e.instances));
        Ok(())
    };
    let r = train_dataset(
        &model,
        &desc(),
        &data,
        2,
        &[],
        &in_memory(2, Some(3)),
        Some(&hook),
    )
    .unwrap();
    assert_eq!(r.instances, 400);
    assert_eq!(r.batches, 2 * 2 * 13);
    assert!(
        model.seen.iter().all(|s| s.load(Ordering::Relaxed) == 2),
        "every instance trained once per epoch"
    );
    let trained = trained(&model);
    assert_eq!(trained.iter().sum::<usize>(), 52);
    assert!(
        trained[1] > 26 + 13,
        "the fast worker trained {trained:?} batches"
    );
    assert_eq!(*epochs.lock().unwrap(), vec![(1, 200), (2, 200)]);
    assert_eq!(r.epochs.len(), 2);
    // Each share of 100 is 12 batches of 8 and one of 4; the mean size over the epoch's
    // instances weighs each batch by its instances: 2 * (12 * 8 * 8 + 4 * 4) / 200.
    assert_eq!(
        r.epochs[0].get("size"),
        Some(2.0 * (12.0 * 64.0 + 16.0) / 200.0)
    );
}

// However the threads share the work, the batches are the same: one pass of each share per
// epoch, in an order fixed by the seed. Each instance's first word is its line number; the
// batches' contents are the same set in two runs.
#[test]
fn the_batches_do_not_depend_on_which_thread_trains_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = numbered_data(dir.path(), 300);
    let run = |seed| {
        let model = Lopsided::new(3, 300, 0);
        train_dataset(&model, &desc(), &data, 3, &[], &in_memory(3, seed), None).unwrap();
        let mut batches = model.batches.into_inner().unwrap();
        assert_eq!(batches.len(), 3 * 3 * 13);
        batches.sort();
        batches
    };
    let a = run(Some(5));
    assert_eq!(a, run(Some(5)));
    assert_ne!(a, run(Some(6)));
    // Every epoch reshuffles every share: no two batches are the same.
    let mut distinct = a.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), a.len());
}

/// A model whose workers hold back what they train until flushed (as a CTR model's copies of its
/// hot rows), and can fail on its n-th batch, or ask the run to stop after it.
struct Holder {
    fail_at: Option<usize>,
    stop_at: Option<(usize, Stop)>,
    trained: AtomicUsize,
    flushed: AtomicUsize,
}

impl Holder {
    fn new(fail_at: Option<usize>) -> Self {
        Holder {
            fail_at,
            stop_at: None,
            trained: AtomicUsize::new(0),
            flushed: AtomicUsize::new(0),
        }
    }

    /// A holder that requests `stop` when it has trained its `n`-th batch (0-based), as Ctrl-C
    /// would in the middle of a run.
    fn stopping(n: usize, stop: &Stop) -> Self {
        Holder {
            stop_at: Some((n, stop.clone())),
            ..Holder::new(None)
        }
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.trained.load(Ordering::SeqCst),
            self.flushed.load(Ordering::SeqCst),
        )
    }
}

impl Model for Holder {
    /// The batches trained since the last flush.
    type Worker = usize;
    fn metrics(&self) -> Vec<String> {
        ["size"].iter().map(|s| s.to_string()).collect()
    }
    fn startup(&self) {}
    fn worker(&self, _desc: &DataFeedDesc) -> Result<usize> {
        Ok(0)
    }
    fn train_batch(
        &self,
        held: &mut usize,
        batch: &Batch,
        out: &mut [f64],
        _stages: Option<&mut StageTimes>,
    ) -> Result<()> {
        // Like a CTR model, a failing batch has trained the instances before the bad one.
        *held += 1;
        let n = self.trained.fetch_add(1, Ordering::SeqCst);
        if self.fail_at == Some(n) {
            return Err(Error::Empty {
                what: "holder batch",
            });
        }
        if let Some((_, stop)) = self.stop_at.as_ref().filter(|(at, _)| *at == n) {
            stop.request();
        }
        out[0] = batch.len as f64;
        Ok(())
    }
    fn eval_batch(
        &self,
        held: &mut usize,
        batch: &Batch,
        out: &mut [f64],
        _predictions: Option<&mut String>,
    ) -> Result<()> {
        self.train_batch(held, batch, out, None)
    }
    fn flush(&self, held: &mut usize) {
        self.flushed
            .fetch_add(std::mem::take(held), Ordering::SeqCst);
    }
    fn tables(&self) -> Vec<&Table> {
        Vec::new()
    }
    fn describe(&self) -> String {
        "holder".into()
    }
}

// 100 instances in batches of 8, 2 threads: 7 batches a thread and epoch. When an epoch is
// reported, every batch of it (and of the epochs before) has been flushed, though the other
// thread may be training the next epoch; when the run returns, every batch has.
#[test]
fn workers_are_flushed_before_their_epoch_is_reported_and_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let data = numbered_data(dir.path(), 100);
    let model = Holder::new(None);
    let seen = Mutex::new(Vec::new());
    let hook = |e: &EpochReport| {
        seen.lock().unwrap().push((e.epoch, model.counts().1));
        Ok(())
    };
    let epochs = 4;
    train_dataset(
        &model,
        &desc(),
        &data,
        2,
        &[],
        &in_memory(epochs, Some(3)),
        Some(&hook),
    )
    .unwrap();
    let (trained, flushed) = model.counts();
    assert_eq!(trained, 14 * epochs);
    assert_eq!(flushed, trained);
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), epochs);
    for (epoch, flushed) in seen {
        assert!(
            flushed >= 14 * epoch,
            "epoch {epoch}: {flushed} batches flushed"
        );
    }
}

// A streaming run reports every epoch, in order, once all its batches are trained and flushed,
// though readers of 3 files and 2 workers run into the next epoch: each report holds one pass
// over the files, and the hook sees the batches of the epochs before it in the tables.
#[test]
fn streaming_runs_report_and_hook_every_epoch_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..3)
        .map(|f| {
            let path = dir.path().join(format!("part-{f}"));
            std::fs::copy(numbered_file(dir.path(), 50 + f), &path).unwrap();
            path
        })
        .collect();
    let model = Holder::new(None);
    let seen = Mutex::new(Vec::new());
    let hook = |e: &EpochReport| {
        seen.lock()
            .unwrap()
            .push((e.epoch, e.instances, model.counts().1));
        Ok(())
    };
    let mut options = quiet();
    options.feed.epochs = 4;
    let r = run_from_files(&model, &desc(), &files, 2, &[], &options, Some(&hook)).unwrap();
    assert_eq!(r.instances, 4 * 153);
    let seen = seen.into_inner().unwrap();
    assert_eq!(
        seen.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(),
        (1..=4).map(|e| (e, 153)).collect::<Vec<_>>()
    );
    // At least 20 batches of 8 per epoch (153 instances, with a short batch per reader).
    for &(epoch, _, flushed) in &seen {
        assert!(
            flushed >= 20 * epoch,
            "epoch {epoch}: {flushed} batches flushed"
        );
    }
    assert_eq!(r.epochs.len(), 4);
    // Each epoch's own time runs from the previous epoch's end: together, the run to the last.
    let took: std::time::Duration = r.epochs.iter().map(|e| e.took).sum();
    assert_eq!(took, r.epochs[3].elapsed);
    let (trained, flushed) = model.counts();
    assert_eq!(flushed, trained);
}

// Files without a line train nothing: the run fails as an empty in-memory dataset does, and
// no epoch is reported (so nothing is saved). A prediction input that cannot be read is named
// as it is, not as a worker's failure.
#[test]
fn empty_training_files_and_missing_inputs_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let model = Holder::new(None);
    let hooked = AtomicUsize::new(0);
    let hook = |_: &EpochReport| {
        hooked.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };
    let mut options = quiet();
    options.feed.epochs = 2;
    let e = run_from_files(&model, &desc(), &[empty], 2, &[], &options, Some(&hook))
        .unwrap_err()
        .to_string();
    assert_eq!(e, "training data is empty");
    assert_eq!(hooked.load(Ordering::Relaxed), 0);

    // The output a failed prediction run was writing is never committed: the file it would have
    // replaced stays as it was.
    let missing = dir.path().join("missing");
    let out = dir.path().join("p.txt");
    std::fs::write(&out, "earlier predictions\n").unwrap();
    let mut output = Output::create(&out).unwrap();
    let e = eval_from_files(
        &model,
        &desc(),
        std::slice::from_ref(&missing),
        2,
        &[],
        &quiet(),
        Some(&mut output),
    )
    .unwrap_err();
    drop(output);
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&missing.display().to_string()),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "earlier predictions\n"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

// Streaming from files, and a run that stops on a worker's error: what the workers trained is
// flushed either way, the failing batch included.
#[test]
fn workers_are_flushed_when_streaming_and_when_a_batch_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = numbered_file(dir.path(), 100);
    let model = Holder::new(None);
    run_from_files(
        &model,
        &desc(),
        std::slice::from_ref(&path),
        2,
        &[],
        &quiet(),
        None,
    )
    .unwrap();
    let (trained, flushed) = model.counts();
    assert!(trained >= 13, "{trained} batches");
    assert_eq!(flushed, trained);

    let failing = Holder::new(Some(5));
    let e = run_from_files(&failing, &desc(), &[path], 2, &[], &quiet(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("holder batch"), "{e}");
    let (trained, flushed) = failing.counts();
    assert!(trained >= 6, "{trained} batches");
    assert_eq!(flushed, trained);

    let data = numbered_data(dir.path(), 100);
    let failing = Holder::new(Some(20));
    train_dataset(
        &failing,
        &desc(),
        &data,
        2,
        &[],
        &in_memory(3, Some(1)),
        None,
    )
    .unwrap_err();
    let (trained, flushed) = failing.counts();
    assert!(trained >= 21, "{trained} batches");
    assert_eq!(flushed, trained);
}

// 100 instances in batches of 8 (13 batches an epoch), 1 thread, 4 epochs; the stop is requested
// while batch 20 (of epoch 2) trains. The thread ends after that batch: epoch 1 is reported and
// hooked, epoch 2 is not, and the run returns what it trained, flushed, in memory or streaming.
#[test]
fn a_stop_request_ends_a_training_run_after_the_current_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = numbered_file(dir.path(), 100);
    let data = numbered_data(dir.path(), 100);
    for stream in [false, true] {
        let mut options = in_memory(4, Some(1));
        if stream {
            options.feed.mode = FeedMode::Stream;
        }
        let model = Holder::stopping(20, &options.stop);
        let hooked = Mutex::new(Vec::new());
        let hook = |e: &EpochReport| {
            hooked.lock().unwrap().push(e.epoch);
            Ok(())
        };
        let report = if stream {
            run_from_files(
                &model,
                &desc(),
                std::slice::from_ref(&path),
                1,
                &[],
                &options,
                Some(&hook),
            )
        } else {
            train_dataset(&model, &desc(), &data, 1, &[], &options, Some(&hook))
        }
        .unwrap();
        assert!(report.stopped, "stream {stream}");
        assert_eq!(hooked.into_inner().unwrap(), [1], "stream {stream}");
        assert_eq!(report.epochs.len(), 1);
        assert_eq!(report.epochs[0].instances, 100);
        assert_eq!(
            report.batches, 21,
            "stream {stream}: the batch that asked was the last"
        );
        assert_eq!(report.instances, 100 + 8 * 8);
        let (trained, flushed) = model.counts();
        assert_eq!((trained, flushed), (21, 21), "stream {stream}");
    }
}

// With 2 threads each ends after the batch it holds: nothing past one more batch is trained.
// A request that comes before a run stops it before its first batch, and that is no error
// (a streaming run that trained nothing otherwise fails).
#[test]
fn a_stop_request_stops_every_thread_and_a_run_not_yet_started() {
    let dir = tempfile::tempdir().unwrap();
    let path = numbered_file(dir.path(), 100);
    let data = numbered_data(dir.path(), 100);
    let options = in_memory(4, Some(1));
    let model = Holder::stopping(20, &options.stop);
    let report = train_dataset(&model, &desc(), &data, 2, &[], &options, None).unwrap();
    assert!(report.stopped);
    let (trained, flushed) = model.counts();
    assert!((21..=22).contains(&trained), "{trained} batches");
    assert_eq!(flushed, trained);
    assert_eq!(report.batches as usize, trained);

    // The request stays made: the next run sharing it stops at once.
    let again = Holder::new(None);
    for stream in [false, true] {
        let mut options = options.clone();
        if stream {
            options.feed.mode = FeedMode::Stream;
        }
        let report = if stream {
            run_from_files(
                &again,
                &desc(),
                std::slice::from_ref(&path),
                2,
                &[],
                &options,
                None,
            )
        } else {
            train_dataset(&again, &desc(), &data, 2, &[], &options, None)
        }
        .unwrap();
        assert!(
            report.stopped && report.epochs.is_empty(),
            "stream {stream}"
        );
        assert_eq!(report.instances, 0);
    }
    assert_eq!(again.counts(), (0, 0));
}

// Metrics or predictions of a part of the data are no result: a stopped evaluation fails.
#[test]
fn a_stopped_evaluation_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = numbered_file(dir.path(), 100);
    let options = quiet();
    options.stop.request();
    let model = Holder::new(None);
    let e = eval_from_files(
        &model,
        &desc(),
        std::slice::from_ref(&path),
        2,
        &[],
        &options,
        None,
    )
    .unwrap_err();
    assert_eq!(e, Error::Stopped { what: "evaluation" });
    let out = dir.path().join("p.txt");
    let mut output = Output::create(&out).unwrap();
    let e = eval_from_files(
        &model,
        &desc(),
        &[path],
        2,
        &[],
        &options,
        Some(&mut output),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "prediction stopped on request before the end of its data"
    );
    drop(output);
    assert!(!out.exists(), "an uncommitted output leaves no file");
}

// A thread count no machine needs (a typo) is refused before anything is allocated, as is 0.
#[test]
fn thread_counts_out_of_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = numbered_data(dir.path(), 10);
    let model = Holder::new(None);
    for threads in [0, MAX_THREADS + 1, 100_000] {
        let e = train_dataset(&model, &desc(), &data, threads, &[], &quiet(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("threads"), "{threads}: {e}");
    }
    assert_eq!(model.counts(), (0, 0));
}

// The epoch line: one thread is "1 thread"; an epoch shorter than the millisecond the line
// shows has no rate to show (it read 44444444445/s).
#[test]
fn epoch_lines_say_what_was_measured() {
    let report = |took: std::time::Duration| EpochReport {
        epoch: 3,
        fetched: vec![("loss".into(), 0.5)],
        unavailable: Vec::new(),
        instances: 200,
        elapsed: took,
        took,
    };
    let short = report(std::time::Duration::from_micros(4)).line(1);
    assert_eq!(
        short,
        "epoch 3: 200 instances in 0.000s (-/s, 1 thread)  loss 0.50000"
    );
    let long = report(std::time::Duration::from_millis(100)).line(2);
    assert_eq!(
        long,
        "epoch 3: 200 instances in 0.100s (2000/s, 2 threads)  loss 0.50000"
    );
}

/// A run per epoch placed in the whole schedule ([`Span`]) trains as one run of all the epochs
/// does: one thread, the files' order, the same batches, and the linear decay followed across the
/// runs (not restarted in each), so the tables end with the same bits.
#[test]
fn runs_of_one_epoch_in_a_span_follow_the_whole_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let train = write_corpus(dir.path(), "train", 2, 200, 21);
    let data = InMemoryDataset::load(&desc(), &train, &FeedOptions::default()).unwrap();
    let trained = |spans: bool| {
        let mut cfg = bow_cfg();
        cfg.lr_schedule = LrSchedule::Linear;
        let model = Bow::new(cfg, Sgd { lr: 0.5 }).unwrap();
        startup(&model);
        if spans {
            for before in 0..3 {
                let mut o = in_memory(1, None);
                o.span = Some(Span { before, total: 3 });
                train_dataset(&model, &desc(), &data, 1, &[], &o, None).unwrap();
            }
        } else {
            train_dataset(&model, &desc(), &data, 1, &[], &in_memory(3, None), None).unwrap();
        }
        embedding_values(&model)
    };
    let whole = trained(false);
    assert_eq!(trained(true), whole);
    // Without the span, each run decays to zero on its own: another model.
    let model = Bow::new(bow_cfg(), Sgd { lr: 0.5 }).unwrap();
    startup(&model);
    for _ in 0..3 {
        train_dataset(&model, &desc(), &data, 1, &[], &in_memory(1, None), None).unwrap();
    }
    assert_ne!(embedding_values(&model), whole);
}

/// Every weight of `model`'s embedding, row after row.
fn embedding_values(model: &Bow<Sgd<f32>>) -> Vec<f32> {
    let table = model.embedding();
    let mut row = vec![0.0f32; table.dim()];
    (0..table.rows())
        .flat_map(|r| {
            table.read_weights(r, &mut row);
            row.clone()
        })
        .collect()
}
