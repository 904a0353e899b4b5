//! `hogwild train` as a user runs it: when the model is saved.

use std::path::Path;
use std::process::Output;

mod common;
use common::hogwild;

/// A small logistic-regression setup in `dir`: desc, config and 200 lines of data.
fn setup(dir: &Path) {
    std::fs::write(
        dir.join("data.prototxt"),
        r#"name: "MultiSlotDataFeed"
batch_size: 16
multi_slot_desc {
  slots { name: "a" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("lr.toml"),
        "[model]\nkind = \"lr\"\nbuckets = 64\n\n[optimizer]\nkind = \"adagrad\"\nlr = 0.1\n",
    )
    .unwrap();
    let lines: String = (0..200)
        .map(|i| format!("1 {} 1 {}\n", i % 7, i % 2))
        .collect();
    std::fs::write(dir.join("train.ms"), lines).unwrap();
}

fn saved_lines(out: &Output) -> Vec<String> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("saved "))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_model_is_saved_after_the_last_epoch_and_as_often_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let train = [
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--epochs",
        "3",
        "--threads",
        "2",
        "--save",
        "m.ckpt",
    ];
    // Default: at most once a minute after an epoch, always after the last.
    let out = hogwild(dir.path(), &train);
    assert_eq!(saved_lines(&out), ["saved m.ckpt (epoch 3)"]);
    assert!(dir.path().join("m.ckpt").exists());
    // After every epoch.
    let every = [&train[..], &["--save-every", "0"]].concat();
    let out = hogwild(dir.path(), &every);
    assert_eq!(
        saved_lines(&out),
        [
            "saved m.ckpt (epoch 1)",
            "saved m.ckpt (epoch 2)",
            "saved m.ckpt (epoch 3)"
        ]
    );
    // The saved model predicts.
    let out = hogwild(
        dir.path(),
        &[
            "predict",
            "--model",
            "m.ckpt",
            "--feed",
            "data.prototxt",
            "train.ms",
            "-o",
            "p.txt",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let predictions = std::fs::read_to_string(dir.path().join("p.txt")).unwrap();
    assert_eq!(predictions.lines().count(), 200);
    // A bad interval is named.
    for bad in ["-1", "soon", "inf"] {
        let arg = format!("--save-every={bad}");
        let out = hogwild(dir.path(), &[&train[..], &[arg.as_str()]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains("--save-every") && err.contains(bad), "{err}");
    }
}
