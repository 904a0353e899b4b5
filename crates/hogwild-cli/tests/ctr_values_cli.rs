//! `hogwild convert` then `hogwild train` on data whose label only a feature's value carries, as
//! a user runs them: the keys `convert` prints make `lr` and `fm` read the values, libffm's field
//! numbers and VW's importance weights.

mod common;
use common::{hogwild, run_ok as ok, text};

#[path = "../../hogwild/tests/support/ctr_toy.rs"]
mod ctr_toy;
use ctr_toy::value_dependent;

/// `hogwild train --quiet` of `model.toml` on `train.ms` (read with `data.prototxt`), then
/// `extra`.
fn train_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "--config",
        "model.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    args
}

/// The `[model]` lines `convert` prints after its note.
fn printed_keys(stdout: &str) -> String {
    let (_, after) = stdout
        .split_once("add to [model]:\n")
        .unwrap_or_else(|| panic!("no note in {stdout:?}"));
    after
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The test AUC `train --test` printed.
fn test_auc(stdout: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("test:"))
        .unwrap_or_else(|| panic!("no test line in {stdout:?}"));
    let (_, auc) = line.split_once("auc ").expect("an auc");
    auc.trim().parse().unwrap()
}

#[test]
fn converted_values_train_to_a_high_auc_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["libsvm", "libffm", "vw"] {
        // A directory per format: each writes its own data.prototxt.
        let d = &dir.path().join(format);
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("train.txt"), value_dependent(format, 2000, 1)).unwrap();
        std::fs::write(d.join("test.txt"), value_dependent(format, 1000, 2)).unwrap();
        let convert =
            |input: &str, output: &str| ok(d, &["convert", "--from", format, input, "-o", output]);
        let printed = convert("train.txt", "train.ms");
        convert("test.txt", "test.ms");
        let keys = printed_keys(&printed);
        let expected = match format {
            "libsvm" => "values = { ids = \"values\" }\n",
            "libffm" => "values = { ids = \"values\" }\nfield_numbers = { ids = \"fields\" }\n",
            _ => "values = { ids = \"values\" }\nweight_slot = \"weight\"\n",
        };
        assert_eq!(keys, expected, "{printed}");
        for kind in ["lr", "fm"] {
            let config = format!(
                "[model]\nkind = \"{kind}\"\nbuckets = 4096\n{keys}\n\
                 [optimizer]\nkind = \"adagrad\"\nlr = 0.1\n"
            );
            std::fs::write(d.join("model.toml"), config).unwrap();
            let trained = ok(
                d,
                &train_args(&[
                    "--test",
                    "test.ms",
                    "--epochs",
                    "5",
                    "--threads",
                    "2",
                    "--save",
                    "model.ckpt",
                ]),
            );
            let auc = test_auc(&trained);
            eprintln!("{format} {kind}: test AUC {auc}");
            assert!(auc > 0.95, "{format} {kind}: test AUC {auc}\n{trained}");
            // The saved model, values configuration and all, evaluates the same.
            let evaluated = ok(
                d,
                &[
                    "eval",
                    "--model",
                    "model.ckpt",
                    "--feed",
                    "data.prototxt",
                    "test.ms",
                ],
            );
            assert!(
                evaluated.contains(&format!("auc {auc:.5}")),
                "{format} {kind}: {evaluated} after {trained}"
            );
        }
    }
}

#[test]
fn a_missing_values_slot_and_a_bad_value_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("train.txt"), "1 1:0.5 2:1\n0 1:0.25\n").unwrap();
    ok(
        d,
        &["convert", "--from", "libsvm", "train.txt", "-o", "train.ms"],
    );
    let train = |config: &str| {
        std::fs::write(d.join("model.toml"), config).unwrap();
        let out = hogwild(d, &train_args(&["--threads", "1"]));
        assert!(!out.status.success());
        text(&out.stderr)
    };
    let base = "[model]\nkind = \"lr\"\nbuckets = 64\n";
    let opt = "\n[optimizer]\nkind = \"sgd\"\nlr = 0.1\n";
    let e = train(&format!("{base}values = {{ ids = \"vals\" }}\n{opt}"));
    assert!(
        e.contains("values.ids: the DataFeedDesc has no used slot \"vals\""),
        "{e}"
    );
    // A hand-edited file: a NaN value (the MultiSlot parser stops it with the file and line),
    // and a value short.
    std::fs::write(d.join("train.ms"), "1 1 1 3 1 nan \n").unwrap();
    let e = train(&format!("{base}values = {{ ids = \"values\" }}\n{opt}"));
    assert!(
        e.contains("train.ms:1: slot \"values\": value 1 \"nan\" is out of range for float"),
        "{e}"
    );
    std::fs::write(d.join("train.ms"), "1 1 2 3 4 1 0.5 \n").unwrap();
    let e = train(&format!("{base}values = {{ ids = \"values\" }}\n{opt}"));
    assert!(
        e.contains("train.ms:1: slot \"values\": 1 values for the 2 ids of slot \"ids\""),
        "{e}"
    );
    // The converter names a value no model can use, with its file and line.
    std::fs::write(d.join("bad.txt"), "1 1:0.5\n0 1:inf\n").unwrap();
    let out = hogwild(
        d,
        &["convert", "--from", "libsvm", "bad.txt", "-o", "bad.ms"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("bad.txt:2: value \"inf\" is not a finite number"),
        "{}",
        text(&out.stderr)
    );
}
