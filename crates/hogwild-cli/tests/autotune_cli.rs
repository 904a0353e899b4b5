//! `hogwild train --budget --validation --tune`: the search trains the configuration as given
//! first, keeps (and saves) the best trial's model, scores what it says it scores, and refuses
//! what it cannot do before it reads any data.

use std::path::Path;

mod common;
use common::{convert_text, fails, lr_lines, lr_setup, ok};

/// The text-classification walk-through's data (docs/text-classification.md), converted:
/// train.ms, valid.ms (its test lines) and the data.prototxt `convert` writes.
fn bow_setup(d: &Path) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/text");
    for f in ["train.txt", "test.txt", "model.toml"] {
        std::fs::copy(examples.join(f), d.join(f)).unwrap();
    }
    convert_text(
        d,
        "train.txt",
        "train.ms",
        &["--build-vocab", "--vocab", "vocab.txt"],
    );
    convert_text(d, "test.txt", "valid.ms", &["--vocab", "vocab.txt"]);
}

/// The number after `key ` in `line`.
fn number_after(line: &str, key: &str) -> f64 {
    let at = line
        .find(key)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + key.len();
    line[at..]
        .split(|c: char| c == ',' || c.is_whitespace())
        .find(|s| !s.is_empty())
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{key} in {line}: {e}"))
}

#[test]
fn the_search_keeps_the_best_trial_and_scores_what_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bow_setup(d);
    let out = ok(
        d,
        &[
            "train",
            "--config",
            "model.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--epochs",
            "2",
            "--threads",
            "1",
            "--validation",
            "valid.ms",
            "--budget",
            "4",
            "--save",
            "best.ckpt",
        ],
    );
    let trials: Vec<&str> = out.lines().filter(|l| l.starts_with("trial ")).collect();
    // The first trial is the configuration as given (model.toml: lr 0.5, dim 16, bigrams on).
    assert!(
        trials[0].starts_with("trial 1: lr 0.5000 dim 16 epochs 2 bigrams on: validation accuracy"),
        "{out}"
    );
    let scored: Vec<f64> = trials
        .iter()
        .filter(|l| l.contains("validation accuracy"))
        .map(|l| number_after(l, "validation accuracy"))
        .collect();
    assert!(
        scored.len() >= 2,
        "a 4 s budget runs more than one trial: {out}"
    );
    let summary = out
        .lines()
        .find(|l| l.starts_with("autotune: best of "))
        .unwrap_or_else(|| panic!("{out}"));
    let best = number_after(summary, "validation accuracy");
    let max = scored.iter().cloned().fold(f64::MIN, f64::max);
    assert_eq!(best, max, "the best is the highest score: {out}");
    assert!(out.contains("saved best.ckpt (trial "), "{out}");
    // The saved model is the best trial's: evaluated on the validation files, it scores what the
    // search reported (both to 5 digits).
    let eval = ok(
        d,
        &[
            "eval",
            "--model",
            "best.ckpt",
            "--feed",
            "data.prototxt",
            "valid.ms",
            "--threads",
            "1",
        ],
    );
    assert_eq!(number_after(&eval, "accuracy"), best, "{eval}\n{out}");
}

#[test]
fn tune_limits_the_search_and_ctr_models_are_scored_by_auc() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lr_setup(d, &lr_lines(400));
    std::fs::write(d.join("valid.ms"), lr_lines(100)).unwrap();
    let out = ok(
        d,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--threads",
            "1",
            "--validation",
            "valid.ms",
            "--budget",
            "1.5",
            "--tune",
            "epochs",
        ],
    );
    for line in out.lines().filter(|l| l.starts_with("trial ")) {
        // Only the epochs move: the rate stays lr.toml's.
        let settings = &line[line.find(": ").unwrap() + 2..];
        assert!(settings.starts_with("epochs "), "{line}");
        assert!(
            line.contains("validation auc") || line.contains("stopped by the budget"),
            "{line}"
        );
    }
    let summary = out
        .lines()
        .find(|l| l.starts_with("autotune: best of "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(summary.contains("with lr = 0.1, --epochs "), "{summary}");
    assert!(!out.contains("saved "), "no --save, nothing saved: {out}");
}

#[test]
fn what_the_search_cannot_do_is_refused_before_any_data_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lr_setup(d, &lr_lines(40));
    std::fs::write(d.join("valid.ms"), lr_lines(10)).unwrap();
    std::fs::write(d.join("kept.ckpt"), "an older model").unwrap();
    let base = [
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let cases: [(&[&str], &str); 8] = [
        (&["--budget", "5"], "--validation"),
        (&["--validation", "valid.ms", "--tune", "lr"], "--budget"),
        (
            &[
                "--validation",
                "valid.ms",
                "--budget",
                "5",
                "--early-stop",
                "2",
            ],
            "cannot be used with",
        ),
        (
            &["--validation", "valid.ms", "--budget", "0"],
            "more than 0",
        ),
        (
            &[
                "--validation",
                "valid.ms",
                "--budget",
                "5",
                "--tune",
                "bigrams",
            ],
            "--tune bigrams: not a setting of this model (it has lr, epochs)",
        ),
        (
            &[
                "--validation",
                "valid.ms",
                "--budget",
                "5",
                "--tune",
                "width",
            ],
            "invalid value 'width' for '--tune",
        ),
        (
            &[
                "--validation",
                "missing.ms",
                "--budget",
                "5",
                "--save",
                "kept.ckpt",
            ],
            "missing.ms",
        ),
        (
            &["--validation", "valid.ms", "--budget", "5", "--stream"],
            "--stream",
        ),
    ];
    for (extra, said) in cases {
        let args = with(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let err = fails(d, &args);
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(
        std::fs::read_to_string(d.join("kept.ckpt")).unwrap(),
        "an older model"
    );
    // A budget no trial fits in: an error, and nothing saved.
    let err = fails(
        d,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--epochs",
            "100000",
            "--validation",
            "valid.ms",
            "--budget",
            "0.2",
            "--save",
            "new.ckpt",
        ],
    );
    assert!(
        err.contains("--budget 0.2: no trial finished in time") && err.contains("larger budget"),
        "{err}"
    );
    assert!(!d.join("new.ckpt").exists());
}

#[test]
fn word2vec_has_no_validation_score_to_search_for() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/word2vec");
    for f in ["model.toml", "data.prototxt"] {
        std::fs::copy(examples.join(f), d.join(f)).unwrap();
    }
    std::fs::write(d.join("corpus.txt"), "a b c\n").unwrap();
    let err = fails(
        d,
        &[
            "train",
            "--config",
            "model.toml",
            "--feed",
            "data.prototxt",
            "corpus.txt",
            "--validation",
            "corpus.txt",
            "--budget",
            "5",
        ],
    );
    assert!(
        err.contains("a word2vec model has no label to validate against"),
        "{err}"
    );
}
