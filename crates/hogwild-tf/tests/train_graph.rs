//! The runner on the example bag-of-words graph (exported by examples/export_bow_graph.py with a
//! stock optimizer, so these tests need no op library): init, training, evaluation, checkpoints,
//! threads, and every error path a user can hit.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use hogwild::executor::{Run, RunOptions};
use hogwild::feed::{DataFeedDesc, FeedMode};
use hogwild::Model;
use hogwild_tf::{SessionConfig, SlotKind, SlotRef, SlotValuesRef, TfModel};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Exports the example graph once per test binary (vocab 50, dim 4, Adagrad lr 0.5).
fn graph() -> &'static Path {
    static GRAPH: OnceLock<PathBuf> = OnceLock::new();
    GRAPH.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hogwild-tf-tests");
        let out = dir.join("bow.meta");
        let status = Command::new(root().join(".venv/bin/python"))
            .arg(root().join("examples/export_bow_graph.py"))
            .args(["--out".as_ref(), out.as_os_str()])
            .args([
                "--vocab",
                "50",
                "--dim",
                "4",
                "--optimizer",
                "adagrad",
                "--lr",
                "0.5",
            ])
            .env("TF_CPP_MIN_LOG_LEVEL", "3")
            .status()
            .expect("run .venv/bin/python (make setup creates it)");
        assert!(status.success(), "export_bow_graph.py failed");
        out
    })
}

fn slots() -> Vec<(String, SlotKind)> {
    vec![
        ("words".to_string(), SlotKind::U64),
        ("label".to_string(), SlotKind::U64),
    ]
}

/// A batch built in memory: words 0..25 vote for class 0, 25..50 for class 1.
#[derive(Clone)]
struct TestBatch {
    words: Vec<u64>,
    words_at: Vec<usize>,
    label: Vec<u64>,
    label_at: Vec<usize>,
}

impl TestBatch {
    fn new(instances: &[(&[u64], u64)]) -> Self {
        let mut b = TestBatch {
            words: vec![],
            words_at: vec![0],
            label: vec![],
            label_at: vec![0],
        };
        for (words, label) in instances {
            b.words.extend_from_slice(words);
            b.words_at.push(b.words.len());
            b.label.push(*label);
            b.label_at.push(b.label.len());
        }
        b
    }
}

impl TestBatch {
    fn slot_refs(&self) -> Vec<SlotRef<'_>> {
        vec![
            SlotRef {
                values: SlotValuesRef::U64(&self.words),
                offsets: &self.words_at,
            },
            SlotRef {
                values: SlotValuesRef::U64(&self.label),
                offsets: &self.label_at,
            },
        ]
    }
}

/// 8 batches of 4 separable instances each.
fn data() -> Vec<TestBatch> {
    (0..8u64)
        .map(|b| {
            let inst: Vec<(Vec<u64>, u64)> = (0..4u64)
                .map(|i| {
                    let label = (b + i) % 2;
                    let base = label * 25;
                    (
                        vec![base + (b * 3 + i) % 25, base + (b + 7 * i) % 25, base + i],
                        label,
                    )
                })
                .collect();
            let refs: Vec<(&[u64], u64)> = inst.iter().map(|(w, l)| (w.as_slice(), *l)).collect();
            TestBatch::new(&refs)
        })
        .collect()
}

fn load() -> TfModel {
    let model = TfModel::load(graph(), &[], &SessionConfig::default()).expect("load the graph");
    model.graph().init().expect("run the init op");
    model
}

const DESC: &str = r#"name: "MultiSlotDataFeed"
batch_size: 4
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#;

fn desc() -> DataFeedDesc {
    DataFeedDesc::from_text(DESC).unwrap()
}

/// `batches` as a MultiSlot file, in order.
fn write_batches(dir: &Path, name: &str, batches: &[TestBatch]) -> PathBuf {
    let mut text = String::new();
    for b in batches {
        for i in 0..b.label.len() {
            let words = &b.words[b.words_at[i]..b.words_at[i + 1]];
            text.push_str(&words.len().to_string());
            for w in words {
                text.push_str(&format!(" {w}"));
            }
            text.push_str(&format!(" 1 {}\n", b.label[i]));
        }
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn quiet(epochs: usize, mode: FeedMode) -> RunOptions {
    let mut o = RunOptions {
        print_period: 0,
        ..RunOptions::default()
    };
    o.feed.epochs = epochs;
    o.feed.mode = mode;
    o
}

/// The values the graph reports over `batches`, evaluated through the executor.
fn eval(model: &TfModel, batches: &[TestBatch]) -> Vec<f64> {
    let dir = tempfile::tempdir().unwrap();
    let file = write_batches(dir.path(), "eval", batches);
    let report = Run::new(model, &desc())
        .threads(1)
        .options(&quiet(1, FeedMode::Stream))
        .eval(&[file])
        .expect("evaluate");
    report.fetched.iter().map(|x| x.1).collect()
}

#[test]
fn reads_the_signature() {
    let model = load();
    assert_eq!(model.metric_names(), &["loss", "accuracy"]);
    assert_eq!(Model::metrics(&model), vec!["loss", "accuracy"]);
    assert_eq!(
        model.graph().input_keys(),
        vec!["label", "words", "words/row_splits"]
    );
}

#[test]
fn training_in_two_threads_learns_the_separable_data() {
    let model = load();
    let before = eval(&model, &data());
    // ln(2): two classes, near-zero initial logits.
    assert!((before[0] - 2f64.ln()).abs() < 0.05, "{before:?}");
    let dir = tempfile::tempdir().unwrap();
    let file = write_batches(dir.path(), "train", &data());
    let options = quiet(20, FeedMode::InMemory { shuffle: None });
    let report = Run::new(&model, &desc())
        .threads(2)
        .options(&options)
        .train(&[file])
        .unwrap();
    assert_eq!(report.batches, 160);
    assert_eq!(report.instances, 640);
    assert_eq!(report.epochs.len(), 20);
    let after = eval(&model, &data());
    assert!(after[0] < 0.1, "loss after training {after:?}");
    assert_eq!(after[1], 1.0);
}

#[test]
fn a_checkpoint_restores_the_trained_variables() {
    let model = load();
    let dir = tempfile::tempdir().unwrap();
    let file = write_batches(dir.path(), "train", &data());
    Run::new(&model, &desc())
        .threads(1)
        .options(&quiet(1, FeedMode::Stream))
        .train(&[file])
        .unwrap();
    let trained = eval(&model, &data());
    let prefix = dir.path().join("ckpt/model");
    model.graph().save(&prefix).unwrap();
    assert!(prefix.with_extension("index").is_file());

    let fresh = load();
    assert_ne!(eval(&fresh, &data()), trained);
    fresh.graph().restore(&prefix).unwrap();
    assert_eq!(eval(&fresh, &data()), trained);
}

#[test]
fn an_out_of_range_id_names_the_op_and_the_batch() {
    let model = load();
    let mut worker = model.slot_worker(&slots()).unwrap();
    let mut out = [0.0; 2];
    let good = TestBatch::new(&[(&[1, 2], 0)]);
    model
        .train_slots(&mut worker, &good.slot_refs(), 1, &mut out)
        .unwrap();
    let bad = TestBatch::new(&[(&[1, 50], 0)]);
    let err = model
        .train_slots(&mut worker, &bad.slot_refs(), 1, &mut out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("training on batch 1 of this thread"), "{err}");
    assert!(err.contains("50 is not in [0, 50)"), "{err}");
    assert!(err.contains("[[{{node Gather}}]]"), "{err}");
}

#[test]
fn a_failing_thread_is_named_and_stops_the_run() {
    let model = load();
    let dir = tempfile::tempdir().unwrap();
    let mut batches = data();
    batches.insert(3, TestBatch::new(&[(&[99], 0)]));
    let file = write_batches(dir.path(), "bad", &batches);
    let err = Run::new(&model, &desc())
        .threads(2)
        .options(&quiet(50, FeedMode::Stream))
        .train(&[file])
        .unwrap_err();
    let hogwild::Error::WorkerFailed { message, .. } = &err else {
        panic!("{err}")
    };
    assert!(message.contains("99 is not in [0, 50)"), "{err}");
    assert!(message.contains("[[{{node Gather}}]]"), "{err}");
}

#[test]
fn bad_batches_name_the_slot() {
    let model = load();
    let mut worker = model.slot_worker(&slots()).unwrap();
    let mut out = [0.0; 2];
    // Two labels in one instance: the label slot is fed dense, one value per instance.
    let b = TestBatch {
        words: vec![1, 2],
        words_at: vec![0, 1, 2],
        label: vec![0, 1, 1],
        label_at: vec![0, 1, 3],
    };
    let err = model
        .train_slots(&mut worker, &b.slot_refs(), 2, &mut out)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "batch 0, slot \"label\": instance 1 has 2 values, instance 0 has 1; a slot fed \
         without row_splits needs the same count in every instance"
    );
    let huge = TestBatch::new(&[(&[u64::MAX], 0)]);
    let err = model
        .train_slots(&mut worker, &huge.slot_refs(), 1, &mut out)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "batch 1, slot \"words\": value 18446744073709551615 at offset 0 does not fit int64"
    );
    let short = TestBatch::new(&[(&[1], 0)]);
    let err = model
        .train_slots(&mut worker, &short.slot_refs(), 2, &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("batch 2, slot \"words\": offsets must rise"),
        "{err}"
    );
}

#[test]
fn slots_must_match_the_graph_inputs() {
    let model = load();
    let err = model
        .slot_worker(&[("words".to_string(), SlotKind::U64)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "slot \"label\": the graph takes input \"label\" (label:0) but the data feed has no used \
         slot \"label\""
    );
    let mut extra = slots();
    extra.push(("price".to_string(), SlotKind::F32));
    let err = model.slot_worker(&extra).unwrap_err().to_string();
    assert!(
        err.starts_with("slot \"price\": the graph has no input for this slot"),
        "{err}"
    );
    let wrong = vec![
        ("words".to_string(), SlotKind::F32),
        ("label".to_string(), SlotKind::U64),
    ];
    let err = model.slot_worker(&wrong).unwrap_err().to_string();
    assert_eq!(
        err,
        "slot \"words\": a float slot cannot feed input \"words\" (words:0) of type int64; it \
         feeds float32"
    );
}

#[test]
fn unusable_graph_files_are_reported_with_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = SessionConfig::default();
    let missing = dir.path().join("none.meta");
    let err = TfModel::load(&missing, &[], &cfg).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}: ", missing.display())),
        "{err}"
    );

    let garbage = dir.path().join("garbage.meta");
    std::fs::write(&garbage, b"\xff\xff\xff").unwrap();
    let err = TfModel::load(&garbage, &[], &cfg).unwrap_err().to_string();
    assert!(err.contains("not a binary MetaGraphDef"), "{err}");

    let lib = dir.path().join("libnone.so");
    let err = TfModel::load(graph(), std::slice::from_ref(&lib), &cfg)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!("cannot load op library {}: no such file", lib.display())
    );
    let not_a_lib = dir.path().join("libfake.so");
    std::fs::write(&not_a_lib, b"not an ELF file").unwrap();
    let err = TfModel::load(graph(), &[not_a_lib], &cfg)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("cannot load op library"), "{err}");
}
