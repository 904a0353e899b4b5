//! Label names and top-k, as fastText's `predict`, `predict-prob`, `test` and `test-label` write
//! them: `hogwild train --labels`, `predict -k --threshold --prob --all-probs`, `eval -k
//! --threshold --per-label`, on a small fastText data set whose three labels each have words of
//! their own, so that the model is near-certain on lines of one label's words. Probabilities are
//! checked against a softmax computed here from the saved weights.

use std::path::Path;

use hogwild::models::format_general;

mod common;
use common::{convert_text, fails, hogwild, lr_lines, lr_setup, ok, text};

const LABELS: [&str; 3] = ["__label__sports", "__label__weather", "__label__cooking"];
const WORDS: [[&str; 4]; 3] = [
    ["goal", "match", "team", "score"],
    ["rain", "snow", "wind", "cloud"],
    ["bake", "roast", "salt", "oven"],
];

/// Test lines: six of one label's words (the model is near-certain on them), then two that mix
/// two labels' words (it is not).
const TEST: &str = "__label__sports goal team score\n\
                    __label__weather rain wind\n\
                    __label__cooking bake oven salt roast\n\
                    __label__sports match\n\
                    __label__weather cloud snow rain\n\
                    __label__cooking salt\n\
                    __label__sports goal rain\n\
                    __label__cooking bake snow wind\n";
const CLEAR: usize = 6;

/// 90 training lines: label `i % 3`, three of its words.
fn train_text() -> String {
    (0..90)
        .map(|i| {
            let words = &WORDS[i % 3];
            let line: Vec<&str> = (0..3).map(|j| words[(i + j) % 4]).collect();
            format!("{} {}\n", LABELS[i % 3], line.join(" "))
        })
        .collect()
}

/// 12 words and id 0 (any other word); no bigrams, no end-of-text row and no bias, so that a
/// line's probabilities are `softmax(W mean(rows of its words))`.
const MODEL: &str = "[model]\nkind = \"bow\"\nvocab = 13\nclasses = 3\ndim = 8\n\
                     bigram_buckets = 0\nend_of_text = false\n\n\
                     [optimizer]\nkind = \"adagrad\"\nlr = 0.5\n";

/// Converts the data (vocabulary in vocab.txt) and trains `named.ckpt` with the label names.
fn setup(d: &Path) {
    std::fs::write(d.join("train.txt"), train_text()).unwrap();
    std::fs::write(d.join("test.txt"), TEST).unwrap();
    std::fs::write(d.join("model.toml"), MODEL).unwrap();
    let convert = convert_text(
        d,
        "train.txt",
        "train.ms",
        &["--build-vocab", "--vocab", "vocab.txt"],
    );
    assert!(
        convert.contains("note: train with --labels vocab.txt to keep the label names"),
        "{convert}"
    );
    convert_text(d, "test.txt", "test.ms", &["--vocab", "vocab.txt"]);
    ok(
        d,
        &train(&["--labels", "vocab.txt", "--save", "named.ckpt"]),
    );
}

fn train<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let base = [
        "train",
        "--config",
        "model.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--epochs",
        "20",
        "--threads",
        "1",
        "--quiet",
    ];
    [&base[..], more].concat()
}

/// `hogwild predict` of `model` on test.ms to standard output, with `more` options.
fn predict(d: &Path, model: &str, more: &[&str]) -> Vec<String> {
    let base = [
        "predict",
        "--model",
        model,
        "--feed",
        "data.prototxt",
        "test.ms",
        "-o",
        "-",
    ];
    let out = ok(d, &[&base[..], more].concat());
    out.lines().map(str::to_string).collect()
}

fn eval(d: &Path, model: &str, more: &[&str]) -> String {
    let base = [
        "eval",
        "--model",
        model,
        "--feed",
        "data.prototxt",
        "test.ms",
    ];
    ok(d, &[&base[..], more].concat())
}

/// The test lines' word ids and gold label ids, from the converted file (`n ids... 1 label`).
fn test_instances(d: &Path) -> Vec<(Vec<usize>, usize)> {
    std::fs::read_to_string(d.join("test.ms"))
        .unwrap()
        .lines()
        .map(|line| {
            let v: Vec<usize> = line
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let n = v[0];
            assert_eq!(v[n + 1], 1, "one label: {line}");
            (v[1..=n].to_vec(), v[n + 2])
        })
        .collect()
}

/// Every test line's class probabilities from the saved weights: `softmax(W h)` with `h` the
/// mean of the line's embedding rows (the model of [`MODEL`]).
fn softmax_of_checkpoint(d: &Path, model: &str) -> Vec<Vec<f64>> {
    let mut ck = hogwild::checkpoint::load(d.join(model)).unwrap();
    let (dim, classes) = (8, 3);
    let emb = ck.take_table("embedding", 13, dim).unwrap();
    let out = ck.take_table("output", classes, dim + 1).unwrap();
    let mut row = vec![0.0f32; dim + 1];
    test_instances(d)
        .iter()
        .map(|(ids, _)| {
            let mut h = vec![0.0f64; dim];
            for &id in ids {
                emb.read_weights(id, &mut row[..dim]);
                for (x, &w) in h.iter_mut().zip(&row) {
                    *x += f64::from(w) / ids.len() as f64;
                }
            }
            let z: Vec<f64> = (0..classes)
                .map(|c| {
                    out.read_weights(c, &mut row);
                    h.iter().zip(&row).map(|(x, &w)| x * f64::from(w)).sum()
                })
                .collect();
            let max = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = z.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.iter().map(|x| x / sum).collect()
        })
        .collect()
}

/// A `--prob` line as (label, probability) pairs, checking that each probability is written as
/// C++ writes a float (`%g`: six significant digits).
fn pairs(line: &str) -> Vec<(String, f64)> {
    let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
    assert_eq!(words.len() % 2, 0, "{line:?}");
    words
        .chunks(2)
        .map(|w| {
            let p: f64 = w[1].parse().unwrap();
            assert_eq!(format_general(p, 6), w[1], "%g format in {line:?}");
            (w[0].to_string(), p)
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 2e-6 + 1e-5 * b.abs()
}

#[test]
fn predictions_name_the_labels_as_fasttext_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let gold = test_instances(d);
    let probs = softmax_of_checkpoint(d, "named.ckpt");
    // Near-certain on the lines of one label's words.
    for (k, p) in probs[..CLEAR].iter().enumerate() {
        assert!(p[gold[k].1] > 0.9, "line {}: {p:?}", k + 1);
    }

    // fastText's `predict`: the most probable label's name per line.
    let lines = predict(d, "named.ckpt", &[]);
    assert_eq!(lines.len(), 8);
    for (k, line) in lines.iter().enumerate().take(CLEAR) {
        assert_eq!(*line, LABELS[gold[k].1], "line {}", k + 1);
    }
    for (line, p) in lines.iter().zip(&probs) {
        let best = (0..3).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
        assert_eq!(*line, LABELS[best]);
    }

    // `predict-prob` with k = 3: every label, most probable first, with the model's softmax;
    // the probabilities of a line sum to at most 1 (to 1 here: all three classes).
    let lines = predict(d, "named.ckpt", &["-k", "3", "--prob"]);
    for (k, line) in lines.iter().enumerate() {
        let got = pairs(line);
        assert_eq!(got.len(), 3, "{line}");
        for w in got.windows(2) {
            assert!(w[0].1 >= w[1].1, "most probable first: {line}");
        }
        let sum: f64 = got.iter().map(|x| x.1).sum();
        assert!(sum <= 1.0 + 1e-5 && sum > 1.0 - 1e-5, "{line}: {sum}");
        for (name, p) in &got {
            let c = LABELS.iter().position(|l| l == name).unwrap();
            assert!(
                close(*p, probs[k][c]),
                "line {}: {name} {p} {:?}",
                k + 1,
                probs[k]
            );
        }
    }
    // With k = 2 the first two of those, separated by single spaces.
    let two = predict(d, "named.ckpt", &["-k", "2", "--prob"]);
    for (line, all) in two.iter().zip(&lines) {
        let words: Vec<&str> = all.split(' ').take(4).collect();
        assert_eq!(*line, words.join(" "));
    }
    // Labels alone, k = 2: `__label__a __label__b`.
    let names = predict(d, "named.ckpt", &["-k", "2"]);
    for (line, all) in names.iter().zip(&lines) {
        let words: Vec<&str> = all.split(' ').step_by(2).take(2).collect();
        assert_eq!(*line, words.join(" "));
    }

    // A threshold: the labels of probability at least 0.9, at most k; a line with none is an
    // empty line (the mixed lines, on which the model is unsure).
    let sure = predict(
        d,
        "named.ckpt",
        &["-k", "3", "--threshold", "0.9", "--prob"],
    );
    assert_eq!(sure.len(), 8);
    for (k, line) in sure.iter().enumerate() {
        let want: Vec<&str> = LABELS
            .iter()
            .zip(&probs[k])
            .filter(|(_, &p)| p >= 0.9)
            .map(|(l, _)| *l)
            .collect();
        let got: Vec<String> = pairs(line).into_iter().map(|x| x.0).collect();
        assert_eq!(got, want, "line {}: {line:?}", k + 1);
        assert_eq!(line.is_empty(), want.is_empty());
    }
    assert!(sure[CLEAR..].iter().any(String::is_empty), "{sure:?}");

    // The table of every class's probability, in label id order.
    let table = predict(d, "named.ckpt", &["--all-probs"]);
    for (k, line) in table.iter().enumerate() {
        let (class, rest) = line.split_once('\t').unwrap();
        let p: Vec<f64> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
        assert_eq!(p.len(), 3);
        for c in 0..3 {
            assert!((p[c] - probs[k][c]).abs() <= 6e-7, "{line} {:?}", probs[k]);
        }
        let best = (0..3).max_by(|&a, &b| probs[k][a].total_cmp(&probs[k][b]));
        assert_eq!(class.parse::<usize>().ok(), best);
    }
}

/// The expected `test-label` line of a label from its counts.
fn label_line(name: &str, right: usize, predicted: usize, gold: usize) -> String {
    let value = |n: usize, d: usize| {
        if d == 0 {
            "--------".to_string()
        } else {
            format!("{:.6}", n as f64 / d as f64)
        }
    };
    format!(
        "F1-Score : {}  Precision : {}  Recall : {}   {name}",
        value(2 * right, predicted + gold),
        value(right, predicted),
        value(right, gold)
    )
}

#[test]
fn eval_prints_precision_and_recall_at_k_as_fasttext_test() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let gold: Vec<usize> = test_instances(d).iter().map(|x| x.1).collect();
    let eval_line = eval(d, "named.ckpt", &[]);
    assert!(
        eval_line.starts_with("test: 8 instances  loss "),
        "{eval_line}"
    );
    assert_eq!(eval_line.lines().count(), 1, "no top-k lines unless asked");

    for k in [1usize, 2, 3] {
        // The truth from the predictions: how many predicted labels are gold.
        let ks = k.to_string();
        let lines = predict(d, "named.ckpt", &["-k", &ks]);
        let mut right = 0;
        let mut predicted = 0;
        for (line, &g) in lines.iter().zip(&gold) {
            let names: Vec<&str> = line.split(' ').collect();
            predicted += names.len();
            right += usize::from(names.contains(&LABELS[g]));
        }
        assert_eq!(predicted, 8 * k);
        let out = eval(d, "named.ckpt", &["-k", &ks]);
        let want = format!(
            "{}N\t8\nP@{k}\t{}\nR@{k}\t{}\n",
            eval_line,
            format_general(right as f64 / predicted as f64, 3),
            format_general(right as f64 / 8.0, 3)
        );
        assert_eq!(out, want, "k = {k}");
    }
    // With every label predicted, every gold label is found.
    assert!(eval(d, "named.ckpt", &["-k", "3"]).ends_with("P@3\t0.333\nR@3\t1\n"));

    // test-label: per label, from the -k 1 predictions, then N, P@1, R@1 with three decimals.
    let lines = predict(d, "named.ckpt", &[]);
    let mut want = eval_line.clone();
    for (id, name) in LABELS.iter().enumerate() {
        let predicted = lines.iter().filter(|l| l == name).count();
        let gold_n = gold.iter().filter(|&&g| g == id).count();
        let right = lines
            .iter()
            .zip(&gold)
            .filter(|(l, &g)| g == id && l == name)
            .count();
        want.push_str(&label_line(name, right, predicted, gold_n));
        want.push('\n');
    }
    let right = lines
        .iter()
        .zip(&gold)
        .filter(|(l, &g)| *l == LABELS[g])
        .count();
    let p = right as f64 / 8.0;
    want.push_str(&format!("N\t8\nP@1\t{p:.3}\nR@1\t{p:.3}\n"));
    assert_eq!(eval(d, "named.ckpt", &["--per-label"]), want);
    // Counted by several threads, a batch of two lines each: the same counts.
    let desc = std::fs::read_to_string(d.join("data.prototxt")).unwrap();
    assert!(desc.contains("batch_size: 32"), "{desc}");
    std::fs::write(
        d.join("small.prototxt"),
        desc.replace("batch_size: 32", "batch_size: 2"),
    )
    .unwrap();
    let threads = [
        "eval",
        "--model",
        "named.ckpt",
        "--feed",
        "small.prototxt",
        "test.ms",
        "--threads",
        "3",
        "--per-label",
    ];
    assert_eq!(ok(d, &threads), want);

    // A threshold no label reaches: no prediction, so no precision (nan), and a recall of 0; a
    // label never predicted has no precision either.
    let none = eval(d, "named.ckpt", &["--threshold", "1", "--per-label"]);
    assert!(
        none.contains(
            "F1-Score : 0.000000  Precision : --------  Recall : 0.000000   __label__sports\n"
        ) && none.ends_with("N\t8\nP@1\tnan\nR@1\t0.000\n"),
        "{none}"
    );
}

/// `model.ckpt` without its label names: the file an older hogwild wrote (which stored no such
/// section), made from `named.ckpt` by saving it again without the section.
fn strip_names(d: &Path, from: &str, to: &str) {
    let ck = hogwild::checkpoint::load(d.join(from)).unwrap();
    let sections: Vec<_> = ck
        .sections
        .iter()
        .filter(|s| s.name != hogwild::models::LABELS_SECTION)
        .cloned()
        .collect();
    assert!(sections.len() < ck.sections.len(), "the names were stored");
    let tables: Vec<_> = ck.tables.iter().collect();
    hogwild::checkpoint::save(&d.join(to), &ck.meta, &sections, &tables).unwrap();
}

#[test]
fn models_without_names_load_and_write_label_ids() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    strip_names(d, "named.ckpt", "old.ckpt");
    let base = [
        "predict",
        "--model",
        "old.ckpt",
        "--feed",
        "data.prototxt",
        "test.ms",
        "-o",
        "-",
    ];
    let out = hogwild(d, &[&base[..], &["-k", "2", "--prob"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with(
            "note: old.ckpt holds no label names (trained without --labels, or saved by an \
             older hogwild): labels are written as their ids\n"
        ),
        "{}",
        text(&out.stderr)
    );
    // The same predictions, each label named by its id (0, 1, 2 in vocab.txt's order).
    let named = predict(d, "named.ckpt", &["-k", "2", "--prob"]);
    let ids: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(ids.len(), named.len());
    for (id_line, named_line) in ids.iter().zip(&named) {
        let renamed = LABELS
            .iter()
            .enumerate()
            .fold(named_line.clone(), |line, (id, name)| {
                line.replace(name, &id.to_string())
            });
        assert_eq!(*id_line, renamed);
    }
    let per_label = eval(d, "old.ckpt", &["--per-label"]);
    assert!(
        per_label.contains("   0\n") && per_label.contains("   2\n"),
        "{per_label}"
    );
    // The table and the metrics need no names, and say nothing of them.
    let out = hogwild(d, &[&base[..], &["--all-probs"]].concat());
    assert!(out.status.success() && text(&out.stderr).starts_with("wrote 8 predictions"));
    // A model trained without --labels is such a model too; resuming it with --labels names it.
    ok(d, &train(&["--save", "plain.ckpt"]));
    assert_eq!(predict(d, "plain.ckpt", &[])[0], "0");
    ok(
        d,
        &[
            "train",
            "--resume",
            "old.ckpt",
            "--labels",
            "vocab.txt",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--quiet",
            "--save",
            "renamed.ckpt",
        ],
    );
    assert_eq!(predict(d, "renamed.ckpt", &[])[0], LABELS[0]);
}

#[test]
fn bad_options_and_files_are_named_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    // Predictions never replace an existing output when the command fails.
    std::fs::write(d.join("out.txt"), "earlier predictions\n").unwrap();
    let predict_to = |model: &'static str, data: &'static str, more: &[&'static str]| {
        let base = [
            "predict",
            "--model",
            model,
            "--feed",
            "data.prototxt",
            data,
            "-o",
            "out.txt",
        ];
        [&base[..], more].concat()
    };
    let eval_of = |model: &'static str, data: &'static str, more: &[&'static str]| {
        let base = ["eval", "--model", model, "--feed", "data.prototxt", data];
        [&base[..], more].concat()
    };
    for (args, want) in [
        (
            predict_to("named.ckpt", "test.ms", &["-k", "0"]),
            "error: invalid value '0' for '-k <N>': 0 labels predict nothing: give 1 or more",
        ),
        (
            eval_of("named.ckpt", "test.ms", &["-k", "0"]),
            "error: invalid value '0' for '-k <N>': 0 labels predict nothing: give 1 or more",
        ),
        (
            predict_to("named.ckpt", "test.ms", &["-k", "two"]),
            "error: invalid value 'two' for '-k <N>': \"two\" is not a number of labels",
        ),
        (
            predict_to("named.ckpt", "test.ms", &["--threshold", "1.5"]),
            "error: invalid value '1.5' for '--threshold <P>': 1.5 is not a probability: give \
             0 to 1",
        ),
        (
            eval_of("named.ckpt", "test.ms", &["--threshold=-0.1"]),
            "error: invalid value '-0.1' for '--threshold <P>': -0.1 is not a probability: \
             give 0 to 1",
        ),
        (
            eval_of("named.ckpt", "test.ms", &["--threshold", "most"]),
            "error: invalid value 'most' for '--threshold <P>': \"most\" is not a number",
        ),
        (
            predict_to("named.ckpt", "test.ms", &["--all-probs", "-k", "2"]),
            "error: the argument '--all-probs' cannot be used with '-k <N>'",
        ),
        (
            predict_to("named.ckpt", "test.ms", &["--all-probs", "--prob"]),
            "error: the argument '--all-probs' cannot be used with '--prob'",
        ),
        (
            predict_to("missing.ckpt", "test.ms", &["-k", "2"]),
            "error: checkpoint missing.ckpt: cannot open: ",
        ),
        (
            predict_to("named.ckpt", "missing.ms", &["-k", "2"]),
            "error: data file missing.ms: cannot read: ",
        ),
        (
            eval_of("named.ckpt", "missing.ms", &["--per-label"]),
            "error: data file missing.ms: cannot read: ",
        ),
        (
            eval_of("missing.ckpt", "test.ms", &["-k", "2"]),
            "error: checkpoint missing.ckpt: cannot open: ",
        ),
    ] {
        let e = fails(d, &args);
        assert!(e.starts_with(want), "{args:?}:\n{e}");
    }
    assert_eq!(
        std::fs::read_to_string(d.join("out.txt")).unwrap(),
        "earlier predictions\n"
    );

    // Labels belong to bag-of-words models.
    lr_setup(d, &lr_lines(40));
    ok(
        d,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--quiet",
            "--save",
            "lr.ckpt",
        ],
    );
    let e = fails(d, &predict_to("lr.ckpt", "train.ms", &["--prob"]));
    assert_eq!(
        e,
        "error: -k, --threshold, --prob and --all-probs apply to bag-of-words models (kind = \
         \"bow\"); lr.ckpt holds a lr model\n"
    );
    let e = fails(d, &eval_of("lr.ckpt", "train.ms", &["--per-label"]));
    assert_eq!(
        e,
        "error: -k, --threshold and --per-label apply to bag-of-words models (kind = \"bow\"); \
         lr.ckpt holds a lr model\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("out.txt")).unwrap(),
        "earlier predictions\n"
    );
    let lr_train = [
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--labels",
        "vocab.txt",
    ];
    let e = fails(d, &lr_train);
    assert_eq!(
        e,
        "error: --labels names the labels of bag-of-words models (kind = \"bow\"); this is a lr \
         model\n"
    );
}

#[test]
fn train_checks_the_label_file_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let e = fails(d, &train(&["--labels", "missing.txt", "--save", "m.ckpt"]));
    assert!(
        e.starts_with("error: --labels file missing.txt: cannot read: "),
        "{e}"
    );
    std::fs::write(d.join("two.txt"), "label\t__label__a\nlabel\t__label__b\n").unwrap();
    let e = fails(d, &train(&["--labels", "two.txt", "--save", "m.ckpt"]));
    assert!(
        e.starts_with("error: --labels two.txt: 2 labels for a model of classes = 3"),
        "{e}"
    );
    std::fs::write(
        d.join("bad.txt"),
        "label\t__label__a\nlabel\tb c\nlabel\tc\n",
    )
    .unwrap();
    let e = fails(d, &train(&["--labels", "bad.txt", "--save", "m.ckpt"]));
    assert_eq!(
        e,
        "error: --labels bad.txt: model config: labels: label 1: \"b c\" is no name (empty, or \
         with whitespace)\n"
    );
    std::fs::write(d.join("junk.txt"), "not a vocabulary\n").unwrap();
    let e = fails(d, &train(&["--labels", "junk.txt", "--save", "m.ckpt"]));
    assert!(
        e.contains("junk.txt:1: expected \"label<TAB>name<TAB>count\""),
        "{e}"
    );
    assert!(!d.join("m.ckpt").exists(), "nothing was trained");
    // A saved model keeps the names it was trained with.
    std::fs::write(
        d.join("other.txt"),
        "label\t__label__sports\nlabel\t__label__rain\nlabel\t__label__cooking\n",
    )
    .unwrap();
    let e = fails(
        d,
        &[
            "train",
            "--resume",
            "named.ckpt",
            "--labels",
            "other.txt",
            "--feed",
            "data.prototxt",
            "train.ms",
        ],
    );
    assert_eq!(
        e,
        "error: --labels other.txt: label 1 is __label__rain there, but named.ckpt names it \
         __label__weather: a saved model keeps the names it was trained with\n"
    );
}
