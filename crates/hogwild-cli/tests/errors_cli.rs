//! Bad input as a user meets it: every error names the file and line (and the slot or column),
//! `check` finds them before training, a bad-line budget skips what the feed cannot read, and
//! `eval` refuses what it cannot measure.

use std::path::Path;
use std::process::Output;

mod common;
use common::{hogwild, hogwild_with_env, lr_lines, lr_setup};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `args` in `dir` and returns stdout; fails with stderr if the command failed.
fn ok(dir: &Path, args: &[&str]) -> String {
    let out = hogwild(dir, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Runs `args` in `dir`, expects it to fail, and returns stderr.
fn fails(dir: &Path, args: &[&str]) -> String {
    let out = hogwild(dir, args);
    assert!(
        !out.status.success(),
        "{args:?} should fail: {}",
        text(&out.stdout)
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    text(&out.stderr)
}

const BOW_DESC: &str = r#"name: "MultiSlotDataFeed"
batch_size: 64
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#;

/// A bag-of-words setup in `dir`: `data.prototxt` (batches of 64), `bow.toml` (10 words, 2
/// classes) and `train.ms`: 200 lines, words 0-4 for class 0 and 5-9 for class 1, but the last
/// 8 lines carry the other class's words (hard to get right).
fn bow_setup(dir: &Path) {
    std::fs::write(dir.join("data.prototxt"), BOW_DESC).unwrap();
    std::fs::write(
        dir.join("bow.toml"),
        "[model]\nkind = \"bow\"\nvocab = 10\nclasses = 2\ndim = 4\n\n\
         [optimizer]\nkind = \"sgd\"\nlr = 0.5\n",
    )
    .unwrap();
    std::fs::write(dir.join("train.ms"), bow_lines(200)).unwrap();
}

fn bow_lines(n: usize) -> String {
    (0..n)
        .map(|i| {
            let label = i % 2;
            let words = if i + 8 >= n { 1 - label } else { label };
            format!(
                "2 {} {} 1 {label}\n",
                words * 5 + i % 5,
                words * 5 + (i + 2) % 5
            )
        })
        .collect()
}

fn train_bow(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "train",
        "--config",
        "bow.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--threads",
        "2",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    hogwild(dir, &args)
}

/// Replaces line `n` (from 1) of `dir/file` with `line`.
fn set_line(dir: &Path, file: &str, n: usize, line: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[n - 1] = line;
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_line_the_model_refuses_is_named_by_file_and_line_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bow_setup(d);
    let cases = [
        (
            "2 1 2 1 7",
            "train.ms:57: slot \"label\": label 7 is out of range (classes = 2)",
        ),
        (
            "2 1 12 1 0",
            "train.ms:57: slot \"words\": word id 12 at offset 1 is out of range (vocab = 10)",
        ),
        (
            "2 1 2 2 0 1",
            "train.ms:57: slot \"label\": expected one label (loss = \"softmax\"; several labels \
             need loss = \"ova\"), got 2 values",
        ),
    ];
    for (line, want) in cases {
        std::fs::write(d.join("train.ms"), bow_lines(200)).unwrap();
        set_line(d, "train.ms", 57, line);
        for mode in [&[][..], &["--stream"], &["--no-shuffle"]] {
            let out = train_bow(d, mode);
            assert!(!out.status.success());
            assert_eq!(
                text(&out.stderr),
                format!("error: training: {want}\n"),
                "{line} {mode:?}"
            );
        }
    }
    // A CTR label that is not 0 or 1, on line 3 of the second file, shuffled in memory.
    std::fs::write(
        d.join("ctr.prototxt"),
        BOW_DESC.replace("\"words\"", "\"site\""),
    )
    .unwrap();
    std::fs::write(
        d.join("lr.toml"),
        "[model]\nkind = \"lr\"\nbuckets = 64\n\n[optimizer]\nkind = \"sgd\"\nlr = 0.1\n",
    )
    .unwrap();
    std::fs::write(d.join("a.ms"), "1 4 1 0\n".repeat(100)).unwrap();
    std::fs::write(d.join("b.ms"), "1 4 1 0\n1 5 1 1\n1 6 1 2\n1 7 1 1\n").unwrap();
    let e = fails(
        d,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "ctr.prototxt",
            "a.ms",
            "b.ms",
            "--quiet",
        ],
    );
    assert_eq!(
        e,
        "error: training: b.ms:3: slot \"label\": label 2 is not 0 or 1\n"
    );
}

#[test]
fn check_with_a_config_lists_every_line_the_model_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bow_setup(d);
    set_line(d, "train.ms", 3, "2 1 2 1 7");
    set_line(d, "train.ms", 10, "x");
    set_line(d, "train.ms", 150, "1 10 1 1");
    let out = hogwild(
        d,
        &[
            "check",
            "--config",
            "bow.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
        ],
    );
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stdout),
        "train.ms:3: slot \"label\": label 7 is out of range (classes = 2)\n\
         train.ms:10: slot \"words\": count \"x\" is not a number\n\
         train.ms:150: slot \"words\": word id 10 at offset 0 is out of range (vocab = 10)\n\
         train.ms: 200 lines, 3 bad (count not a number: 1, does not fit the model: 2)\n"
    );
    assert_eq!(
        text(&out.stderr),
        "error: 3 of 200 lines are bad, in 1 of 1 files\n"
    );
    // Without the model only the line that does not parse is bad.
    let out = hogwild(d, &["check", "--feed", "data.prototxt", "train.ms"]);
    assert!(text(&out.stdout).contains("train.ms: 200 lines, 1 bad (count not a number: 1)"));
}

#[test]
fn check_expands_patterns_and_lists_and_reports_every_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("data.prototxt"), BOW_DESC).unwrap();
    std::fs::create_dir(d.join("parts")).unwrap();
    for (name, body) in [("part-0", "1 1 1 0\n"), ("part-1", "1 2 1 1\n1 3 1 0\n")] {
        std::fs::write(d.join("parts").join(name), body).unwrap();
    }
    std::fs::write(d.join("list.txt"), "parts/part-1\n# a comment\nmore.ms\n").unwrap();
    std::fs::write(d.join("more.ms"), "1 4 1 1\n").unwrap();
    let stdout = ok(
        d,
        &[
            "check",
            "--feed",
            "data.prototxt",
            "parts/part-*",
            "@list.txt",
        ],
    );
    assert!(
        stdout.ends_with("all 6 lines in 4 files are good\n"),
        "{stdout}"
    );
    // `--desc`, the option's old name, still works.
    ok(d, &["check", "--desc", "data.prototxt", "more.ms"]);
    // Every missing file and empty pattern is reported; the readable files are still checked.
    let out = hogwild(
        d,
        &[
            "check",
            "--feed",
            "data.prototxt",
            "gone.ms",
            "more.ms",
            "parts/none-*",
            "also-gone.ms",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("gone.ms: No such file or directory"),
        "{stdout}"
    );
    assert!(stdout.contains("\nmore.ms: 1 lines, 0 bad\n"), "{stdout}");
    assert!(
        stdout.contains("\nparts/none-*: no file matches\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nalso-gone.ms: No such file or directory"),
        "{stdout}"
    );
    assert_eq!(
        text(&out.stderr),
        "error: all 1 lines in 1 files are good; 3 file arguments could not be read\n"
    );
}

#[test]
fn a_bad_line_budget_skips_and_names_what_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bow_setup(d);
    set_line(d, "train.ms", 5, "2 1 x 1 0");
    set_line(d, "train.ms", 90, "");
    for mode in [&[][..], &["--stream", "--epochs", "3"]] {
        let mut args = vec!["--max-bad-lines", "2", "--save", "bow.ckpt"];
        args.extend_from_slice(mode);
        let out = train_bow(d, &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stderr),
            "warning: skipped 2 bad lines in the training files (--max-bad-lines 2); the first 2:\n  \
             train.ms:5: slot \"words\": value 2 \"x\" is not an unsigned integer\n  \
             train.ms:90: slot \"words\": line ends before the count (truncated line)\n",
            "{mode:?}"
        );
    }
    // Past the budget: an error naming the count; strict (the default) stops at the first.
    let e = text(&train_bow(d, &["--max-bad-lines", "1"]).stderr);
    assert!(
        e.starts_with("error: loading the training files: too many bad lines: 2 of ")
            && e.contains(" lines read were bad, over the budget of 1 line; first: train.ms:5: "),
        "{e}"
    );
    let e = text(&train_bow(d, &[]).stderr);
    assert_eq!(
        e,
        "error: loading the training files: train.ms:5: slot \"words\": value 2 \"x\" is not an \
         unsigned integer\n"
    );
    // Predictions keep one output line per input line: a skipped line gives an empty line.
    let out = hogwild(
        d,
        &[
            "predict",
            "--model",
            "bow.ckpt",
            "--feed",
            "data.prototxt",
            "train.ms",
            "-o",
            "pred.tsv",
            "--max-bad-lines",
            "5",
            "--threads",
            "3",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "wrote 198 predictions and 2 empty lines for skipped input lines to pred.tsv\n"
    );
    assert!(text(&out.stderr).contains("\n  train.ms:90: slot \"words\": line ends"));
    let predictions = std::fs::read_to_string(d.join("pred.tsv")).unwrap();
    let lines: Vec<&str> = predictions.lines().collect();
    assert_eq!(lines.len(), 200);
    for (n, line) in lines.iter().enumerate() {
        assert_eq!(line.is_empty(), n + 1 == 5 || n + 1 == 90, "line {}", n + 1);
    }
    // Evaluation skips them the same way.
    let out = hogwild(
        d,
        &[
            "eval",
            "--model",
            "bow.ckpt",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--max-bad-lines",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("test: 198 instances  loss "));
    assert!(text(&out.stderr).starts_with("warning: skipped 2 bad lines in the evaluation files"));
}

/// The value after `name` on a metrics line.
fn metric(line: &str, name: &str) -> f64 {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == name).unwrap();
    words[at + 1].parse().unwrap()
}

#[test]
fn eval_averages_over_instances_and_refuses_what_it_cannot_measure() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bow_setup(d);
    let out = train_bow(d, &["--epochs", "5", "--save", "bow.ckpt"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let eval = ["eval", "--model", "bow.ckpt", "--feed", "data.prototxt"];
    let stdout = ok(d, &[&eval[..], &["train.ms", "--threads", "2"]].concat());
    assert!(stdout.starts_with("test: 200 instances  loss "), "{stdout}");
    // The truth from the predictions, line by line: the mean over the 200 instances. Averaging
    // the four batches' means (64, 64, 64 and the 8 hard lines) would give far less accuracy.
    ok(
        d,
        &[
            "predict",
            "--model",
            "bow.ckpt",
            "--feed",
            "data.prototxt",
            "train.ms",
            "-o",
            "p.tsv",
            "--all-probs",
        ],
    );
    let labels: Vec<usize> = (0..200).map(|i| i % 2).collect();
    let scored: Vec<(f64, f64)> = std::fs::read_to_string(d.join("p.tsv"))
        .unwrap()
        .lines()
        .zip(&labels)
        .map(|(line, &label)| {
            let (class, probs) = line.split_once('\t').unwrap();
            let p: Vec<f64> = probs.split(' ').map(|x| x.parse().unwrap()).collect();
            let right = f64::from(u8::from(class.parse::<usize>().unwrap() == label));
            (-p[label].ln(), right)
        })
        .collect();
    let mean = |xs: &[(f64, f64)], k: usize| {
        xs.iter()
            .map(|x| if k == 0 { x.0 } else { x.1 })
            .sum::<f64>()
            / xs.len() as f64
    };
    let (loss, accuracy) = (mean(&scored, 0), mean(&scored, 1));
    let batches: Vec<f64> = scored.chunks(64).map(|b| mean(b, 1)).collect();
    let batch_mean = batches.iter().sum::<f64>() / batches.len() as f64;
    assert!(
        (batch_mean - accuracy).abs() > 0.05,
        "{batch_mean} {accuracy}"
    );
    assert!(
        (metric(&stdout, "accuracy") - accuracy).abs() < 1e-5,
        "{stdout} {accuracy}"
    );
    assert!(
        (metric(&stdout, "loss") - loss).abs() < 1e-4,
        "{stdout} {loss}"
    );

    // Nothing to measure: an empty file, a feed without the label slot.
    std::fs::write(d.join("empty.ms"), "").unwrap();
    let e = fails(d, &[&eval[..], &["empty.ms"]].concat());
    assert_eq!(e, "error: evaluation data is empty\n");
    std::fs::write(
        d.join("words.prototxt"),
        BOW_DESC.replace(
            "is_dense: false is_used: true }\n}",
            "is_dense: false is_used: false }\n}",
        ),
    )
    .unwrap();
    let e = fails(
        d,
        &[
            "eval",
            "--model",
            "bow.ckpt",
            "--feed",
            "words.prototxt",
            "train.ms",
        ],
    );
    assert_eq!(
        e,
        "error: model config: label_slot: evaluation needs the used slot \"label\" in the \
         DataFeedDesc to measure against (predictions do without it)\n"
    );
}

#[test]
fn auc_over_one_class_says_why_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lr_setup(d, &lr_lines(50));

    std::fs::write(d.join("zeros.ms"), "1 3 1 0\n".repeat(20)).unwrap();
    let stdout = ok(
        d,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--test",
            "zeros.ms",
            "--save",
            "lr.ckpt",
            "--quiet",
        ],
    );
    let test = stdout.lines().find(|l| l.starts_with("test:")).unwrap();
    assert!(
        test.ends_with("  auc n/a: needs both classes, got 0 positive and 20 negative instances"),
        "{test}"
    );
    let stdout = ok(
        d,
        &[
            "eval",
            "--model",
            "lr.ckpt",
            "--feed",
            "data.prototxt",
            "zeros.ms",
        ],
    );
    assert_eq!(stdout.trim_end(), test);
}

#[test]
fn unreadable_bytes_and_prototxt_syntax_are_named_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bow_setup(d);
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend_from_slice(bow_lines(4).as_bytes());
    std::fs::write(d.join("train.ms"), bom).unwrap();
    let e = text(&train_bow(d, &[]).stderr);
    assert_eq!(
        e,
        "error: loading the training files: train.ms:1: byte order mark (U+FEFF) at the start \
         of the line: save the file without one\n"
    );
    std::fs::write(d.join("train.ms"), "2 1 2 1 0\n2 1\x002 1 1\n").unwrap();
    let e = text(&train_bow(d, &[]).stderr);
    assert_eq!(
        e,
        "error: loading the training files: train.ms:2: NUL byte at column 4 (binary or corrupt \
         data)\n"
    );
    std::fs::write(
        d.join("data.prototxt"),
        BOW_DESC.replace(
            "type: \"uint64\" is_dense: false is_used: true }\n}",
            "type \"uint64\" }\n}",
        ),
    )
    .unwrap();
    let e = text(&train_bow(d, &[]).stderr);
    assert_eq!(
        e,
        "error: data feed desc data.prototxt:5:30: not valid protobuf text format: expected ':' \
         or a message value, but found '\"uint64\"'\n"
    );
    // A value of the wrong type in the model's configuration is named by its key.
    std::fs::write(d.join("data.prototxt"), BOW_DESC).unwrap();
    set_line(d, "bow.toml", 5, "dim = \"4\"");
    let e = text(&train_bow(d, &[]).stderr);
    assert_eq!(
        e,
        "error: model config: bow.toml: model.dim: invalid type: string \"4\", expected usize\n"
    );
}

#[test]
fn rust_backtrace_does_not_turn_a_user_error_into_a_stack_dump() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bow_setup(d);
    for var in ["RUST_BACKTRACE", "RUST_LIB_BACKTRACE"] {
        let out = hogwild_with_env(
            d,
            &[
                "train",
                "--config",
                "bow.toml",
                "--feed",
                "missing.prototxt",
                "train.ms",
            ],
            &[(var, "1")],
        );
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            "error: missing.prototxt: No such file or directory (os error 2)\n",
            "{var}"
        );
    }
}
