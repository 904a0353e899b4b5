//! `hogwild export --format saved-model` as a user reaches its mistakes: a target that holds
//! anything is refused and left as it was, a CTR model needs the DataFeedDesc of its fields,
//! `--format word2vec` is for word2vec models, and a SavedModel is no stream. What a SavedModel
//! predicts is checked against Python TensorFlow in tests/test_export_saved_model.py.
#![cfg(feature = "tf")]

mod common;
use common::{fails, lr_lines, lr_setup, ok};

/// A trained logistic regression `lr.ckpt` in `dir`.
fn trained(dir: &std::path::Path) {
    lr_setup(dir, &lr_lines(64));
    ok(
        dir,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--epochs",
            "1",
            "--threads",
            "1",
            "--save",
            "lr.ckpt",
            "--quiet",
        ],
    );
}

#[test]
fn a_saved_model_goes_to_a_new_or_empty_directory_and_nothing_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    trained(d);
    fn export(target: &str) -> Vec<&str> {
        vec![
            "export",
            "--model",
            "lr.ckpt",
            "--feed",
            "data.prototxt",
            "-o",
            target,
        ]
    }
    let out = ok(d, &export("new"));
    assert!(
        out.contains("wrote the logistic regression model as a SavedModel to new"),
        "{out}"
    );
    assert!(d.join("new/saved_model.pb").is_file());
    assert!(d.join("new/variables/variables.index").is_file());
    std::fs::create_dir(d.join("empty")).unwrap();
    ok(d, &export("empty"));
    assert!(d.join("empty/saved_model.pb").is_file());
    // A directory that holds anything, and a file, are refused as they are.
    let e = fails(d, &export("new"));
    assert!(e.contains("-o: new exists and is not empty"), "{e}");
    std::fs::write(d.join("file"), "mine").unwrap();
    let e = fails(d, &export("file"));
    assert!(e.contains("-o: file exists and is not a directory"), "{e}");
    assert_eq!(std::fs::read_to_string(d.join("file")).unwrap(), "mine");
    let e = fails(d, &export("no/such/dir"));
    assert!(e.contains("the directory no/such does not exist"), "{e}");
    let e = fails(d, &export("-"));
    assert!(e.contains("the export is a directory"), "{e}");
    // Nothing is left beside the targets.
    let mut names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    names.sort();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn a_ctr_model_needs_its_feed_and_word2vec_text_needs_word2vec() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    trained(d);
    let e = fails(d, &["export", "--model", "lr.ckpt", "-o", "out"]);
    assert!(
        e.contains("lr.ckpt: a CTR model's export needs its DataFeedDesc (--feed data.prototxt)"),
        "{e}"
    );
    assert!(!d.join("out").exists());
    let e = fails(
        d,
        &[
            "export", "--model", "lr.ckpt", "--format", "word2vec", "-o", "v.txt",
        ],
    );
    assert!(
        e.contains("lr.ckpt: only word2vec models have word vectors to export"),
        "{e}"
    );
    // A desc without the model's slots is named.
    std::fs::write(
        d.join("other.prototxt"),
        "name: \"MultiSlotDataFeed\"\nbatch_size: 4\nmulti_slot_desc {\n  \
         slots { name: \"label\" type: \"uint64\" is_dense: false is_used: true }\n}\n",
    )
    .unwrap();
    let e = fails(
        d,
        &[
            "export",
            "--model",
            "lr.ckpt",
            "--feed",
            "other.prototxt",
            "-o",
            "out",
        ],
    );
    assert!(e.contains("--feed other.prototxt"), "{e}");
    assert!(!d.join("out").exists());
}
