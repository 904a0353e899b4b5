//! `hogwild convert` and `hogwild check` as a user runs them.

mod common;
use common::hogwild;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn convert_fasttext_then_check_train_and_test() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("train.txt"),
        "__label__pos good movie\n__label__neg bad movie\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("test.txt"), "__label__neg awful movie\n").unwrap();
    let out = hogwild(
        dir.path(),
        &[
            "convert",
            "--from",
            "fasttext",
            "train.txt",
            "-o",
            "train.ms",
            "--build-vocab",
            "--vocab",
            "vocab.txt",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("train.ms")).unwrap(),
        "2 1 2 1 0 \n2 3 2 1 1 \n"
    );
    // Three words have ids 1 to 3 and any other word 0: the model needs vocab = 4, which is
    // what convert must say (it said "3 words" only, one short).
    assert!(
        text(&out.stdout).contains(
            "vocabulary: 3 words (ids 1 to 3; 0 is any other word), 2 labels -> vocab.txt\n"
        ) && text(&out.stdout).contains("  vocab = 4\n  classes = 2\n"),
        "{}",
        text(&out.stdout)
    );
    let out = hogwild(
        dir.path(),
        &[
            "convert",
            "--from",
            "fasttext",
            "test.txt",
            "-o",
            "test.ms",
            "--vocab",
            "vocab.txt",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The test data, converted with the training vocabulary, asks for the same model; the
    // training data's desc is left as it is.
    assert!(
        text(&out.stdout).contains("(desc: data.prototxt, unchanged)\n")
            && text(&out.stdout).contains("  vocab = 4\n  classes = 2\n"),
        "{}",
        text(&out.stdout)
    );
    // "awful" is unknown to the training vocabulary: id 0.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("test.ms")).unwrap(),
        "2 0 2 1 1 \n"
    );
    let out = hogwild(
        dir.path(),
        &["check", "--desc", "data.prototxt", "train.ms", "test.ms"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).ends_with("all 3 lines in 2 files are good\n"));
}

/// Hashed words and converter bigrams: the ids span the word buckets, then the bigram buckets.
#[test]
fn convert_fasttext_names_the_vocab_of_hashed_words_and_bigrams() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.txt"), "__label__a x y z\n").unwrap();
    let out = hogwild(
        dir.path(),
        &[
            "convert",
            "--from",
            "fasttext",
            "train.txt",
            "-o",
            "train.ms",
            "--buckets",
            "10",
            "--bigram-buckets",
            "5",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("  vocab = 15\n  classes = 1\n"),
        "{}",
        text(&out.stdout)
    );
    let ids: Vec<u64> = std::fs::read_to_string(dir.path().join("train.ms"))
        .unwrap()
        .split_whitespace()
        .skip(1)
        .take(5)
        .map(|id| id.parse().unwrap())
        .collect();
    assert!(ids.iter().all(|&id| id < 15), "{ids:?}");
}

#[test]
fn check_lists_bad_lines_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("data.prototxt"),
        r#"multi_slot_desc {
             slots { name: "words" type: "uint64" is_used: true }
             slots { name: "label" type: "uint64" is_used: true }
           }"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("a"),
        "2 1 2 1 0\n0 1 0\n-1 5 1 1\n1 5 1 1 x\n",
    )
    .unwrap();
    let out = hogwild(dir.path(), &["check", "--desc", "data.prototxt", "a"]);
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stdout),
        "a:2: slot \"words\": count 0 (every slot needs at least one value; pad it)\n\
         a:3: slot \"words\": count -1 is negative\n\
         a:4: trailing data after the last slot: \"x\"\n\
         a: 4 lines, 3 bad (negative count: 1, trailing garbage: 1, zero count: 1)\n"
    );
    assert!(text(&out.stderr).contains("3 of 4 lines are bad, in 1 of 1 files"));
}

#[test]
fn convert_csv_writes_its_prototxt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.csv"), "late,carrier\n1,UA\n0,DL\n").unwrap();
    let out = hogwild(
        dir.path(),
        &[
            "convert",
            "--from",
            "csv",
            "f.csv",
            "-o",
            "f.ms",
            "--label-column",
            "late",
            "--buckets",
            "1000",
            "--prototxt",
            "f.prototxt",
            "--batch-size",
            "128",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.prototxt")).unwrap(),
        "name: \"MultiSlotDataFeed\"\nbatch_size: 128\nmulti_slot_desc {\n  \
         slots { name: \"late\" type: \"float\" is_dense: false is_used: true }\n  \
         slots { name: \"carrier\" type: \"uint64\" is_dense: false is_used: true }\n}\n"
    );
    let out = hogwild(dir.path(), &["check", "--desc", "f.prototxt", "f.ms"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn convert_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.svm"), "1 3:0.5\n1 oops\n").unwrap();
    let out = hogwild(
        dir.path(),
        &["convert", "--from", "libsvm", "x.svm", "-o", "x.ms"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("x.svm:2: feature \"oops\" is not index:value"),
        "{}",
        text(&out.stderr)
    );
}
