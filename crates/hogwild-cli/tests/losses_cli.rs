//! The classifier's losses for many labels on the real binary: `loss = "ova"` trains lines of
//! several labels end to end (convert, train, predict with a threshold, eval's P@k and R@k over
//! every gold label), `loss = "hs"` and `loss = "ns"` keep the label counts of `--labels` in
//! their checkpoints, and what they refuse is named (several labels with another loss, an
//! unknown loss, hs or ns without counts, no negative labels).

use std::path::Path;

mod common;
use common::{convert_text, fails, ok};

const LABELS: [&str; 3] = ["__label__sports", "__label__weather", "__label__cooking"];
const WORDS: [[&str; 4]; 3] = [
    ["goal", "match", "team", "score"],
    ["rain", "snow", "wind", "cloud"],
    ["bake", "roast", "salt", "oven"],
];

/// 240 training lines: a line of label `i % 3`'s words, or, every fourth line, of sports' and
/// weather's words with both labels (the first label last, as fastText's lines may have it).
fn train_text() -> String {
    (0..240)
        .map(|i| {
            if i % 4 == 3 {
                let w = (
                    WORDS[0][i % 4],
                    WORDS[1][(i + 1) % 4],
                    WORDS[0][(i + 2) % 4],
                );
                return format!("{} {} {} {} {}\n", LABELS[1], w.0, w.1, LABELS[0], w.2);
            }
            let words = &WORDS[i % 3];
            let line: Vec<&str> = (0..3).map(|j| words[(i + j) % 4]).collect();
            format!("{} {}\n", LABELS[i % 3], line.join(" "))
        })
        .collect()
}

/// Two lines of both sports and weather, one of cooking, one of weather.
const TEST: &str = "__label__sports __label__weather goal rain team wind\n\
                    __label__cooking bake oven salt\n\
                    __label__weather score snow __label__sports cloud match\n\
                    __label__weather rain snow\n";

fn model(loss: &str) -> String {
    format!(
        "[model]\nkind = \"bow\"\nvocab = 13\nclasses = 3\ndim = 8\nloss = \"{loss}\"\n\
         bigram_buckets = 0\nend_of_text = false\n\n[optimizer]\nkind = \"adagrad\"\nlr = 0.5\n"
    )
}

/// `hogwild predict` of `model` on `data`, to standard output.
fn predict(d: &Path, model: &str, data: &str, more: &[&str]) -> String {
    let mut args = vec![
        "predict",
        "--model",
        model,
        "--feed",
        "data.prototxt",
        data,
        "-o",
        "-",
    ];
    args.extend_from_slice(more);
    ok(d, &args)
}

/// `hogwild eval` of `model` on `data`.
fn eval(d: &Path, model: &str, data: &str, more: &[&str]) -> String {
    let mut args = vec!["eval", "--model", model, "--feed", "data.prototxt", data];
    args.extend_from_slice(more);
    ok(d, &args)
}

/// Converts the training and test text in `d` (vocabulary with label counts in vocab.txt).
fn setup(d: &Path) {
    std::fs::write(d.join("train.txt"), train_text()).unwrap();
    std::fs::write(d.join("test.txt"), TEST).unwrap();
    let vocab = ["--vocab", "vocab.txt"];
    convert_text(
        d,
        "train.txt",
        "train.ms",
        &[&["--build-vocab"], &vocab[..]].concat(),
    );
    convert_text(d, "test.txt", "test.ms", &vocab);
    for loss in ["softmax", "hs", "ova", "ns", "hsx"] {
        std::fs::write(d.join(format!("{loss}.toml")), model(loss)).unwrap();
    }
}

/// The arguments of `hogwild train` of `{loss}.toml` on train.ms for 10 epochs, saved to
/// `{loss}.ckpt`.
fn train_args(loss: &str, more: &[&str]) -> Vec<String> {
    let (config, save) = (format!("{loss}.toml"), format!("{loss}.ckpt"));
    let base = [
        "train",
        "--config",
        &config,
        "--feed",
        "data.prototxt",
        "train.ms",
        "--epochs",
        "10",
        "--threads",
        "2",
        "--quiet",
        "--save",
        &save,
    ];
    base.iter().chain(more).map(|a| a.to_string()).collect()
}

/// The error of `hogwild train --config config --feed data.prototxt data --quiet more`.
fn train_fails(d: &Path, config: &str, data: &str, more: &[&str]) -> String {
    let mut args = vec![
        "train",
        "--config",
        config,
        "--feed",
        "data.prototxt",
        data,
        "--quiet",
    ];
    args.extend_from_slice(more);
    fails(d, &args)
}

fn train(d: &Path, loss: &str, more: &[&str]) {
    let args = train_args(loss, more);
    ok(d, &args.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn ova_trains_predicts_and_evaluates_lines_of_several_labels() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    // Label ids by first appearance: sports 0, weather 1, cooking 2; the vocabulary counts each
    // label's lines (60 lines of each alone, and 60 two-label lines counted for both).
    let vocab = std::fs::read_to_string(d.join("vocab.txt")).unwrap();
    assert!(
        vocab.starts_with(
            "label\t__label__sports\t120\nlabel\t__label__weather\t120\nlabel\t__label__cooking\t60\n"
        ),
        "{vocab}"
    );
    let converted = std::fs::read_to_string(d.join("train.ms")).unwrap();
    let fourth = converted.lines().nth(3).unwrap().trim_end();
    assert!(
        fourth.ends_with(" 2 1 0"),
        "both labels, in line order: {fourth}"
    );
    train(d, "ova", &["--labels", "vocab.txt"]);
    // Each label is its own yes or no: the two-label lines have two labels above 1/2.
    let sure = predict(d, "ova.ckpt", "test.ms", &["-k", "3", "--threshold", "0.5"]);
    let sorted: Vec<Vec<&str>> = sure
        .lines()
        .map(|l| {
            let mut v: Vec<&str> = l.split(' ').collect();
            v.sort();
            v
        })
        .collect();
    assert_eq!(
        sorted,
        [
            vec!["__label__sports", "__label__weather"],
            vec!["__label__cooking"],
            vec!["__label__sports", "__label__weather"],
            vec!["__label__weather"],
        ],
        "{sure}"
    );
    let probs = predict(d, "ova.ckpt", "test.ms", &["-k", "2", "--prob"]);
    let first: Vec<f64> = probs
        .lines()
        .next()
        .unwrap()
        .split(' ')
        .skip(1)
        .step_by(2)
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(
        first.iter().all(|&p| p > 0.5),
        "independent sigmoids need not sum to 1: {probs}"
    );
    // P@3 and R@3 over every gold label: 6 gold labels, each predicted, nothing else.
    let e = eval(d, "ova.ckpt", "test.ms", &["-k", "3", "--threshold", "0.5"]);
    assert!(e.ends_with("N\t4\nP@3\t1\nR@3\t1\n"), "{e}");
    // At k = 1 a two-label line can find one of its two labels: recall 4 of 6.
    let e = eval(d, "ova.ckpt", "test.ms", &["-k", "1"]);
    assert!(e.ends_with("N\t4\nP@1\t1\nR@1\t0.667\n"), "{e}");
}

/// One label per line (for hs and ns): the test lines of one label in single.ms, the training
/// lines of one label in train.ms. Converted with the vocabulary of all the training lines: the
/// same word ids in both, and its label counts.
fn single_labels(d: &Path) {
    let single: String = TEST
        .lines()
        .skip(1)
        .step_by(2)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("single.txt"), single).unwrap();
    convert_text(d, "single.txt", "single.ms", &["--vocab", "vocab.txt"]);
    let train_lines: String = train_text()
        .lines()
        .filter(|l| l.matches("__label__").count() == 1)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("train.txt"), train_lines).unwrap();
    convert_text(d, "train.txt", "train.ms", &["--vocab", "vocab.txt"]);
}

/// `hogwild train --resume` of `{loss}.ckpt` for one epoch, saved to `{loss}2.ckpt`.
fn resume(d: &Path, loss: &str) {
    let (from, to) = (format!("{loss}.ckpt"), format!("{loss}2.ckpt"));
    ok(
        d,
        &[
            "train",
            "--resume",
            &from,
            "--feed",
            "data.prototxt",
            "train.ms",
            "--epochs",
            "1",
            "--quiet",
            "--save",
            &to,
        ],
    );
}

#[test]
fn hs_keeps_its_counts_and_predicts_from_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    single_labels(d);
    let e = train_fails(d, "hs.toml", "train.ms", &[]);
    assert_eq!(
        e,
        "error: loss = \"hs\" builds its tree from the labels' counts in the training data: give \
         --labels FILE, the vocabulary `hogwild convert --from fasttext --build-vocab --vocab \
         FILE` wrote for it\n"
    );
    train(d, "hs", &["--labels", "vocab.txt", "--test", "single.ms"]);
    let predicted = predict(d, "hs.ckpt", "single.ms", &[]);
    assert_eq!(predicted, "__label__cooking\n__label__weather\n");
    // The whole tree's probabilities sum to 1; -k 3 names every label.
    for line in predict(d, "hs.ckpt", "single.ms", &["--all-probs"]).lines() {
        let sum: f64 = line
            .split(['\t', ' '])
            .skip(1)
            .map(|p| p.parse::<f64>().unwrap())
            .sum();
        assert!((sum - 1.0).abs() < 1e-5, "{line}");
    }
    let top = predict(d, "hs.ckpt", "single.ms", &["-k", "3"]);
    assert!(top.lines().all(|l| l.split(' ').count() == 3), "{top}");
    // Resumed, the model keeps the tree it was trained with (its counts are in the checkpoint).
    resume(d, "hs");
    assert_eq!(predict(d, "hs2.ckpt", "single.ms", &[]), predicted);
}

#[test]
fn ns_draws_by_the_label_counts_and_predicts_each_labels_sigmoid() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    single_labels(d);
    let e = train_fails(d, "ns.toml", "train.ms", &[]);
    assert_eq!(
        e,
        "error: loss = \"ns\" draws its negative labels from the labels' counts in the training \
         data: give --labels FILE, the vocabulary `hogwild convert --from fasttext --build-vocab \
         --vocab FILE` wrote for it\n"
    );
    train(d, "ns", &["--labels", "vocab.txt", "--test", "single.ms"]);
    assert_eq!(
        predict(d, "ns.ckpt", "single.ms", &[]),
        "__label__cooking\n__label__weather\n"
    );
    // Each label's probability is its own sigmoid: the gold's near 1, the others' near 0, and
    // -k 3 names every label, most probable first.
    let probs = predict(d, "ns.ckpt", "single.ms", &["-k", "3", "--prob"]);
    for (line, gold) in probs.lines().zip(["__label__cooking", "__label__weather"]) {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields.len(), 6, "{probs}");
        assert_eq!(fields[0], gold, "{probs}");
        let p: Vec<f64> = fields[1..]
            .iter()
            .step_by(2)
            .map(|p| p.parse().unwrap())
            .collect();
        assert!(p[0] > 0.9 && p[1] < 0.1 && p[2] <= p[1], "{probs}");
    }
    assert_eq!(
        predict(
            d,
            "ns.ckpt",
            "single.ms",
            &["-k", "3", "--threshold", "0.5"]
        ),
        "__label__cooking\n__label__weather\n"
    );
    let e = eval(d, "ns.ckpt", "single.ms", &["-k", "1"]);
    assert!(e.ends_with("N\t2\nP@1\t1\nR@1\t1\n"), "{e}");
    // Resumed, the model draws by the counts in its checkpoint (no --labels).
    resume(d, "ns");
    assert_eq!(
        predict(d, "ns2.ckpt", "single.ms", &[]),
        "__label__cooking\n__label__weather\n"
    );
    // No negative labels is refused by name, before any data is read.
    let zero = model("ns").replace("loss = \"ns\"\n", "loss = \"ns\"\nnegative = 0\n");
    std::fs::write(d.join("ns0.toml"), zero).unwrap();
    let e = train_fails(d, "ns0.toml", "missing.ms", &["--labels", "vocab.txt"]);
    assert!(
        e.contains("ns0.toml") && e.contains("negative: must be at least 1"),
        "{e}"
    );
}

#[test]
fn several_labels_need_ova_and_a_loss_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    // Line 4 of the training file is the first with two labels; one thread meets it first (of
    // two, the other's share may fail first).
    for loss in ["softmax", "hs", "ns"] {
        let mut args = train_args(loss, &["--labels", "vocab.txt", "--no-shuffle"]);
        let at = args.iter().position(|a| a == "--threads").unwrap();
        args[at + 1] = "1".into();
        let e = fails(d, &args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            e,
            format!(
                "error: training: train.ms:4: slot \"label\": expected one label (loss = \
                 \"{loss}\"; several labels need loss = \"ova\"), got 2 values\n"
            )
        );
    }
    let e = train_fails(d, "hsx.toml", "train.ms", &[]);
    assert!(
        e.contains("hsx.toml")
            && e.contains("loss = \"hsx\" is no loss: give \"softmax\", \"hs\", \"ova\" or \"ns\""),
        "{e}"
    );
}
