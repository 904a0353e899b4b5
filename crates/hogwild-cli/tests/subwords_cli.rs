//! Character n-grams (fastText's `-minn`/`-maxn`) through the real binary: `convert --minn --maxn
//! --subword-buckets` keeps them in the vocabulary and repeats them for the test data, so a model
//! trained with `subword_buckets` classifies misspelled words it never saw by their n-grams,
//! where the same model without n-grams sees one unknown word. Bad settings are refused, named.

use std::path::Path;

mod common;
use common::{fails, ok};

const LABELS: [&str; 3] = ["__label__sports", "__label__weather", "__label__cooking"];
const WORDS: [[&str; 4]; 3] = [
    ["football", "stadium", "goalkeeper", "referee"],
    ["thunderstorm", "forecast", "umbrella", "temperature"],
    ["casserole", "oregano", "saucepan", "marinade"],
];

/// Misspellings: no word of these lines is in the training vocabulary.
const TEST: &str = "__label__sports footbal stadiums\n\
                    __label__weather thunderstrom umbrellas\n\
                    __label__cooking casserol oreganos\n\
                    __label__sports goalkeepers\n\
                    __label__weather forecasts temperatures\n\
                    __label__cooking saucepans marinades\n";

/// 90 training lines: label `i % 3`, two of its words.
fn train_text() -> String {
    (0..90)
        .map(|i| {
            let words = &WORDS[i % 3];
            format!(
                "{} {} {}\n",
                LABELS[i % 3],
                words[i % 4],
                words[(i + 1) % 4]
            )
        })
        .collect()
}

fn model(subword_buckets: usize) -> String {
    format!(
        "[model]\nkind = \"bow\"\nvocab = 13\nclasses = 3\ndim = 8\nbigram_buckets = 100\n\
         subword_buckets = {subword_buckets}\n\n[optimizer]\nkind = \"adagrad\"\nlr = 0.5\n"
    )
}

/// Converts train.txt and test.txt into `dir` (with `ngrams` on the training conversion only:
/// the test conversion takes them from the vocabulary), trains and predicts the test lines.
fn predictions(d: &Path, dir: &str, ngrams: &[&str], subword_buckets: usize) -> Vec<String> {
    std::fs::create_dir(d.join(dir)).unwrap();
    let at = |f: &str| format!("{dir}/{f}");
    let mut convert = vec!["convert", "--from", "fasttext", "train.txt"];
    let (train, test, vocab) = (at("train.ms"), at("test.ms"), at("vocab.txt"));
    convert.extend(["-o", &train, "--build-vocab", "--vocab", &vocab]);
    convert.extend(ngrams);
    let said = ok(d, &convert);
    let expect = format!("subword_buckets = {subword_buckets}");
    assert_eq!(said.contains(&expect), subword_buckets > 0, "{said}");
    ok(
        d,
        &[
            "convert", "--from", "fasttext", "test.txt", "-o", &test, "--vocab", &vocab,
        ],
    );
    let (config, feed, ckpt, out) = (
        at("model.toml"),
        at("data.prototxt"),
        at("model.ckpt"),
        at("predictions.txt"),
    );
    std::fs::write(d.join(&config), model(subword_buckets)).unwrap();
    ok(
        d,
        &[
            "train",
            "--config",
            &config,
            "--feed",
            &feed,
            &train,
            "--epochs",
            "30",
            "--threads",
            "1",
            "--quiet",
            "--labels",
            &vocab,
            "--save",
            &ckpt,
        ],
    );
    ok(
        d,
        &[
            "predict", "--model", &ckpt, "--feed", &feed, &test, "-o", &out,
        ],
    );
    std::fs::read_to_string(d.join(&out))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn misspelled_words_are_classified_by_their_ngrams() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("train.txt"), train_text()).unwrap();
    std::fs::write(d.join("test.txt"), TEST).unwrap();
    let ngrams = ["--minn", "3", "--maxn", "6", "--subword-buckets", "5000"];
    let with = predictions(d, "with", &ngrams, 5000);
    let truth: Vec<&str> = TEST.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(with, truth);
    // Without n-grams every test word is the unknown id 0: one prediction for every line.
    let without = predictions(d, "without", &[], 0);
    assert_eq!(without.len(), truth.len());
    assert!(without.iter().all(|p| *p == without[0]), "{without:?}");
}

fn convert<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let base = [
        "convert",
        "--from",
        "fasttext",
        "train.txt",
        "-o",
        "train.ms",
    ];
    [&base[..], more].concat()
}

#[test]
fn bad_ngram_settings_are_refused_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("train.txt"), train_text()).unwrap();
    let e = fails(d, &convert(&["--minn", "3", "--maxn", "6"]));
    assert!(
        e.contains("required arguments were not provided") && e.contains("--subword-buckets"),
        "{e}"
    );
    let e = fails(
        d,
        &convert(&["--minn", "5", "--maxn", "3", "--subword-buckets", "10"]),
    );
    assert_eq!(e.trim(), "error: --maxn: must be at least minn (5), got 3");
    let e = fails(
        d,
        &convert(&["--minn", "0", "--maxn", "3", "--subword-buckets", "10"]),
    );
    assert!(e.starts_with("error: --minn: must be at least 1"), "{e}");
    let e = fails(
        d,
        &convert(&["--minn", "2", "--maxn", "3", "--subword-buckets", "0"]),
    );
    assert!(
        e.starts_with("error: --subword-buckets: must be at least 1"),
        "{e}"
    );
    assert!(!d.join("train.ms").exists() && !d.join("data.prototxt").exists());

    // The test data must repeat the training data's n-grams, which the vocabulary keeps.
    let ngrams = ["--minn", "3", "--maxn", "6", "--subword-buckets", "1000"];
    ok(
        d,
        &convert(&[&["--build-vocab", "--vocab", "vocab.txt"][..], &ngrams].concat()),
    );
    let e = fails(
        d,
        &[
            "convert",
            "--from",
            "fasttext",
            "train.txt",
            "-o",
            "other.ms",
            "--vocab",
            "vocab.txt",
            "--minn",
            "2",
            "--maxn",
            "6",
            "--subword-buckets",
            "1000",
        ],
    );
    assert!(
        e.contains(
            "--vocab vocab.txt: the training data was converted with --minn 3 --maxn 6 \
                    --subword-buckets 1000, not --minn 2"
        ),
        "{e}"
    );
    // A model with fewer n-gram rows than the data's buckets names the id and its settings.
    std::fs::write(d.join("model.toml"), model(10)).unwrap();
    let e = fails(
        d,
        &[
            "train",
            "--config",
            "model.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--threads",
            "1",
        ],
    );
    assert!(
        e.contains("train.ms:")
            && e.contains(": slot \"words\": word id ")
            && e.contains("(vocab = 13 words, then subword_buckets = 10 n-gram buckets)"),
        "{e}"
    );
}
