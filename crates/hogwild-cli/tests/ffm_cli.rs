//! The field-aware factorization machine and `train --validation` as a user runs them: libffm
//! data converted, trained, evaluated; a field number out of range refused with its file and
//! line; early stopping that keeps the best epoch's model.

use std::path::Path;

mod common;
use common::{fails, ok};

#[path = "../../hogwild/tests/support/ctr_toy.rs"]
mod ctr_toy;
use ctr_toy::value_dependent;

/// The value after `name ` in `line`.
fn value(line: &str, name: &str) -> f64 {
    let (_, after) = line
        .split_once(&format!("{name} "))
        .unwrap_or_else(|| panic!("no {name} in {line:?}"));
    after.split_whitespace().next().unwrap().parse().unwrap()
}

/// Converts `name.txt` (libffm or libsvm) in `dir` to `name.ms`.
fn convert(dir: &Path, format: &str, name: &str) {
    let (input, output) = (format!("{name}.txt"), format!("{name}.ms"));
    ok(dir, &["convert", "--from", format, &input, "-o", &output]);
}

fn ffm_config(num_fields: usize) -> String {
    format!(
        "[model]\nkind = \"ffm\"\nbuckets = 4096\ndim = 4\nnum_fields = {num_fields}\n\
         values = {{ ids = \"values\" }}\nfield_numbers = {{ ids = \"fields\" }}\n\
         init_scale = 0.1\n\n[optimizer]\nkind = \"adagrad\"\nlr = 0.2\n"
    )
}

#[test]
fn ffm_trains_on_libffm_fields_and_refuses_a_field_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("train.txt"), value_dependent("libffm", 2000, 1)).unwrap();
    std::fs::write(d.join("test.txt"), value_dependent("libffm", 1000, 2)).unwrap();
    convert(d, "libffm", "train");
    convert(d, "libffm", "test");
    std::fs::write(d.join("ffm.toml"), ffm_config(4)).unwrap();
    fn train(config: &str) -> Vec<&str> {
        vec![
            "train",
            "--config",
            config,
            "--feed",
            "data.prototxt",
            "train.ms",
            "--epochs",
            "5",
            "--threads",
            "2",
            "--quiet",
        ]
    }
    let mut args = train("ffm.toml");
    args.extend(["--test", "test.ms", "--save", "ffm.ckpt"]);
    let trained = ok(d, &args);
    let line = trained.lines().find(|l| l.starts_with("test:")).unwrap();
    let auc = value(line, "auc");
    assert!(auc > 0.9, "test AUC {auc}: {trained}");
    let evaluated = ok(
        d,
        &[
            "eval",
            "--model",
            "ffm.ckpt",
            "--feed",
            "data.prototxt",
            "test.ms",
        ],
    );
    assert!(
        evaluated.contains(&format!("auc {auc:.5}")),
        "{evaluated} after {trained}"
    );

    // Fields 0 to 3 do not fit 3 fields: a line with field 3 (the first the shuffled run
    // trains) is named.
    std::fs::write(d.join("three.toml"), ffm_config(3)).unwrap();
    let e = fails(d, &train("three.toml"));
    assert!(
        e.contains("error: training: train.ms:")
            && e.contains(": slot \"fields\": field number 3 of id")
            && e.contains("is out of range: the model has num_fields = 3 (fields 0 to 2)"),
        "{e}"
    );
    // Without num_fields, the config is refused before any data is read.
    std::fs::write(
        d.join("none.toml"),
        ffm_config(4).replace("num_fields = 4\n", ""),
    )
    .unwrap();
    let e = fails(d, &train("none.toml"));
    assert!(e.contains("none.toml: num_fields: "), "{e}");
}

/// The libsvm lines of `value_dependent` with every label flipped.
fn flipped(lines: &str) -> String {
    lines
        .lines()
        .map(|l| match l.split_once(' ') {
            Some(("1", rest)) => format!("0 {rest}\n"),
            Some((_, rest)) => format!("1 {rest}\n"),
            None => panic!("{l:?}"),
        })
        .collect()
}

// Validation on the training lines with their labels flipped: the better the model fits the
// training labels, the worse it does there, so the first epoch is the best, the run stops
// --early-stop 2 epochs later, and the saved model is the first epoch's.
#[test]
fn validation_keeps_the_best_epoch_and_stops_when_it_gets_worse() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines = value_dependent("libsvm", 2000, 3);
    std::fs::write(d.join("train.txt"), &lines).unwrap();
    std::fs::write(d.join("valid.txt"), flipped(&lines)).unwrap();
    convert(d, "libsvm", "train");
    convert(d, "libsvm", "valid");
    std::fs::write(
        d.join("lr.toml"),
        "[model]\nkind = \"lr\"\nbuckets = 4096\nvalues = { ids = \"values\" }\n\n\
         [optimizer]\nkind = \"sgd\"\nlr = 0.1\n",
    )
    .unwrap();
    let base = [
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--threads",
        "1",
        "--print-period",
        "0",
        "--save",
        "best.ckpt",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--epochs",
        "10",
        "--validation",
        "valid.ms",
        "--early-stop",
        "2",
        "--test",
        "valid.ms",
    ]);
    let out = ok(d, &args);
    let epochs: Vec<&str> = out.lines().filter(|l| l.starts_with("epoch ")).collect();
    assert_eq!(epochs.len(), 3, "{out}");
    let aucs: Vec<f64> = epochs.iter().map(|l| value(l, "validation auc")).collect();
    assert!(aucs[1] < aucs[0] && aucs[2] < aucs[0], "{out}");
    assert!(
        epochs.iter().all(|l| l.contains("validation loss ")),
        "{out}"
    );
    assert!(
        out.contains("early stop after epoch 3: validation auc has not improved for 2 epochs"),
        "{out}"
    );
    assert!(
        out.contains("best.ckpt holds epoch 1 of 3, the best on validation"),
        "{out}"
    );
    assert_eq!(out.matches("saved best.ckpt").count(), 1, "{out}");
    // The saved model is the first epoch's: evaluated, it gives that epoch's validation AUC, as
    // the --test line (which evaluates the best model) does.
    let evaluated = ok(
        d,
        &[
            "eval",
            "--model",
            "best.ckpt",
            "--feed",
            "data.prototxt",
            "valid.ms",
        ],
    );
    let best = format!("auc {:.5}", aucs[0]);
    assert!(evaluated.contains(&best), "{evaluated} vs {out}");
    let test = out.lines().find(|l| l.starts_with("test:")).unwrap();
    assert!(test.contains(&best), "{out}");

    // Options are checked before anything trains.
    for (extra, message) in [
        (
            &["--early-stop", "2"][..],
            "--early-stop stops on the validation metric: give --validation FILE too",
        ),
        (
            &["--validation", "valid.ms", "--early-stop", "0"][..],
            "0 would stop before any epoch could improve",
        ),
        (
            &["--validation", "missing.ms"][..],
            "--validation file missing.ms: cannot read",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        let e = fails(d, &args);
        assert!(e.contains(message), "{extra:?}: {e}");
    }
    let mut args = base[..base.len() - 2].to_vec();
    args.extend(["--validation", "valid.ms"]);
    let e = fails(d, &args);
    assert!(e.contains("give --save"), "{e}");
}
