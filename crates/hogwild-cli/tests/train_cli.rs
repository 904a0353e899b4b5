//! `hogwild train` as a user runs it: when the model is saved.

use std::path::Path;
use std::process::Output;

mod common;
use common::{hogwild, lr_lines, lr_setup};

/// A small logistic-regression setup in `dir`: desc, config and 200 lines of data.
fn setup(dir: &Path) {
    lr_setup(dir, &lr_lines(200));
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
    // Streaming re-reads the file every epoch, and saves and reports every epoch alike.
    let stream = [&every[..], &["--stream"]].concat();
    let out = hogwild(dir.path(), &stream);
    assert_eq!(
        saved_lines(&out),
        [
            "saved m.ckpt (epoch 1)",
            "saved m.ckpt (epoch 2)",
            "saved m.ckpt (epoch 3)"
        ]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let epochs: Vec<&str> = stdout.lines().filter(|l| l.starts_with("epoch ")).collect();
    assert_eq!(epochs.len(), 3, "{stdout}");
    for (k, line) in epochs.iter().enumerate() {
        assert!(
            line.starts_with(&format!("epoch {}: 200 instances in ", k + 1))
                && line.contains("loss"),
            "{line}"
        );
    }
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

#[test]
fn a_word2vec_config_cannot_set_a_second_epoch_count() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("data.prototxt"),
        "name: \"MultiSlotDataFeed\"\nbatch_size: 4\nmulti_slot_desc {\n  \
         slots { name: \"words\" type: \"uint64\" is_dense: false is_used: true }\n}\n",
    )
    .unwrap();
    std::fs::write(d.join("text.txt"), "the cat sat\nthe dog sat\n".repeat(20)).unwrap();
    let config = |extra: &str| {
        format!(
            "[model]\nkind = \"word2vec\"\ninput = \"text\"\nvocab_file = \"{}\"\ndim = 8\n\
             min_count = 1\n{extra}\n[optimizer]\nkind = \"sgd\"\nlr = 0.025\n",
            d.join("vocab.txt").display()
        )
    };
    std::fs::write(d.join("w2v.toml"), config("epochs = 5")).unwrap();
    let args = [
        "train",
        "--config",
        "w2v.toml",
        "--feed",
        "data.prototxt",
        "text.txt",
        "--epochs",
        "2",
        "--threads",
        "2",
        "--save",
        "w2v.ckpt",
    ];
    let out = hogwild(d, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("epochs = 5") && err.contains("--epochs"),
        "the refusal names the setting and the flag: {err}"
    );
    assert!(
        !d.join("w2v.ckpt").exists(),
        "nothing trained, nothing saved"
    );
    // Without it, --epochs sets both the passes and the decay.
    std::fs::write(d.join("w2v.toml"), config("")).unwrap();
    let out = hogwild(d, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("epoch ")).count(),
        2
    );
}
