//! Paddle's own data-feed inputs as a Paddle user brings them, run through the real binary:
//! compressed files read through a `pipe_command`, the current `data_feed.proto` with every
//! field, lines that start with an instance id, the in-memory reader names; and the CTR trap of
//! a used slot the model reads through no key.

mod common;
use common::{fails, hogwild, lr_lines, lr_setup, ok, text, LR_DESC};

use std::path::Path;

/// `LR_DESC` with `extra` added before its closing lines (top-level fields).
fn desc_with(extra: &str) -> String {
    format!("{LR_DESC}{extra}\n")
}

/// Gzips `dir/name` in place (to `name.gz`), as a user's `gzip` does.
fn gzip(dir: &Path, name: &str) {
    let status = std::process::Command::new("gzip")
        .arg("-f")
        .arg(name)
        .current_dir(dir)
        .status()
        .expect("gzip runs");
    assert!(status.success());
}

fn train(dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        "--threads",
        "1",
    ];
    args.extend_from_slice(extra);
    hogwild(dir, &args)
}

/// Item 1: a `.gz` file is decompressed before the pipe_command reads it (Paddle's
/// `zcat FILE | pipe_command`), so a filter command sees text.
#[test]
fn gzip_files_are_decompressed_before_the_pipe_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lr_setup(d, "# a comment\n1 3 1 1\n# another\n1 4 1 0\n1 5 1 1\n");
    std::fs::write(
        d.join("data.prototxt"),
        desc_with("pipe_command: \"grep -v ^#\""),
    )
    .unwrap();
    gzip(d, "train.ms");
    let checked = ok(d, &["check", "--feed", "data.prototxt", "train.ms.gz"]);
    assert!(
        checked.contains("all 3 lines in 1 files are good"),
        "{checked}"
    );
    let out = train(d, &["train.ms.gz"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("epoch 1: 3 instances"),
        "{}",
        text(&out.stdout)
    );
}

/// Item 1: a command that turns a file that is not empty into no line is an error naming the
/// command, the file and what the command wrote on standard error, in check and in train; a
/// command that succeeds but writes on standard error is shown as a warning naming the file.
#[test]
fn a_pipe_command_that_writes_nothing_or_complains_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lr_setup(d, &lr_lines(3));
    let silent = "pipe_command: \"sed -n /nothing/p; echo no match here >&2\"";
    std::fs::write(d.join("data.prototxt"), desc_with(silent)).unwrap();
    let out = hogwild(d, &["check", "--feed", "data.prototxt", "train.ms"]);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let printed = text(&out.stdout);
    assert!(
        printed.contains("failed on train.ms: it wrote no line for a file that is not empty")
            && printed.contains("stderr: no match here")
            && !printed.contains("are good\n"),
        "{printed}"
    );
    let stderr = text(&train(d, &["train.ms"]).stderr);
    assert!(
        stderr.contains("pipe_command \"sed -n /nothing/p; echo no match here >&2\" failed on train.ms: it wrote no line")
            && stderr.contains("stderr: no match here"),
        "{stderr}"
    );
    // A gzip file's message says it was decompressed first.
    gzip(d, "train.ms");
    let printed = text(&hogwild(d, &["check", "--feed", "data.prototxt", "train.ms.gz"]).stdout);
    assert!(
        printed.contains("train.ms.gz: it wrote no line for a file that is not empty (its input was the file decompressed"),
        "{printed}"
    );

    lr_setup(d, &lr_lines(3));
    let noisy = "pipe_command: \"cat; echo deprecated option >&2\"";
    std::fs::write(d.join("data.prototxt"), desc_with(noisy)).unwrap();
    let checked = ok(d, &["check", "--feed", "data.prototxt", "train.ms"]);
    assert!(
        checked.contains(
            "warning: pipe_command \"cat; echo deprecated option >&2\" wrote on standard error \
             reading train.ms: deprecated option"
        ) && checked.contains("all 3 lines in 1 files are good"),
        "{checked}"
    );
    for stream in [false, true] {
        let mut extra = vec!["train.ms", "--epochs", "2"];
        if stream {
            extra.push("--stream");
        }
        let out = train(d, &extra);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stderr = text(&out.stderr);
        // Once, though two epochs read the file.
        assert_eq!(
            stderr
                .matches("wrote on standard error reading train.ms: deprecated option")
                .count(),
            1,
            "stream {stream}: {stderr}"
        );
    }
}

/// Items 2, 3 and 5: the current DataFeedDesc with every field parses; each field hogwild does
/// not honour is named once in a warning; thread_num sets the threads when --threads is not
/// given; SlotRecordInMemoryDataFeed is read as an in-memory reader.
#[test]
fn the_current_desc_parses_and_names_what_it_ignores() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lr_setup(d, &lr_lines(20));
    let desc = "name: \"SlotRecordInMemoryDataFeed\"\nbatch_size: 4\n\
        multi_slot_desc {\n  \
          slots { name: \"a\" type: \"uint64\" is_dense: false is_used: true }\n  \
          slots { name: \"label\" type: \"uint64\" is_dense: false is_used: true }\n  \
          uid_slot: \"a\"\n}\n\
        pipe_command: \"cat\"\nthread_num: 2\nrank_offset: \"rank_offset\"\npv_batch_size: 8\n\
        input_type: 1\nso_parser_name: \"libparser.so\"\n\
        graph_config { walk_degree: 2 walk_len: 4 meta_path: \"u2i-i2u\" gpu_graph_training: false }\n";
    std::fs::write(d.join("data.prototxt"), desc).unwrap();
    let out = hogwild(
        d,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    for field in [
        "uid_slot \"a\" is not honoured",
        "rank_offset \"rank_offset\" is not honoured",
        "pv_batch_size 8 is not honoured",
        "input_type 1 is not honoured",
        "so_parser_name \"libparser.so\" is not honoured",
        "graph_config is not honoured",
    ] {
        let line = format!("warning: data feed desc data.prototxt: {field}");
        assert_eq!(stderr.matches(&line).count(), 1, "{field}: {stderr}");
    }
    // thread_num: 2 is the thread count without --threads.
    assert!(
        text(&out.stdout).contains("epoch 1: 20 instances")
            && text(&out.stdout).contains("2 threads)"),
        "{}",
        text(&out.stdout)
    );
    let out = train(d, &["train.ms"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .contains("note: --threads 1 overrides thread_num: 2 of data feed desc data.prototxt")
            && text(&out.stdout).contains("/s, 1 thread)"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // check reads the desc the same way, and an unknown reader is refused naming the field.
    ok(d, &["check", "--feed", "data.prototxt", "train.ms"]);
    std::fs::write(d.join("data.prototxt"), desc.replace("SlotRecord", "Box")).unwrap();
    let refused = fails(d, &["check", "--feed", "data.prototxt", "train.ms"]);
    assert!(
        refused.contains(
            "data feed desc data.prototxt: name: reader \"BoxInMemoryDataFeed\" is not supported"
        ),
        "{refused}"
    );
}

/// Item 4: lines that start with Paddle's instance id (`1 <id>`, then `1 <content>` and
/// `1 <logkey>` when those are read) train, check and predict with --parse-ins-id; predict writes
/// each prediction after its id; a bad prefix is named with its field, file and line.
#[test]
fn instance_ids_are_read_and_written_with_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plain = lr_lines(10);
    let with_ids: String = plain
        .lines()
        .enumerate()
        .map(|(i, l)| format!("1 ins-{i} {l}\n"))
        .collect();
    lr_setup(d, &with_ids);
    // Without the option the id is where the first slot's count should be.
    let refused = text(&train(d, &["train.ms"]).stderr);
    assert!(
        refused.contains(
            "train.ms:1: slot \"a\": value 1 \"ins-0\" is not a number (a line that starts with \
             an instance id, `1 <id>`, is read with --parse-ins-id)"
        ),
        "{refused}"
    );
    let out = train(d, &["train.ms", "--parse-ins-id", "--save", "m.ckpt"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let checked = ok(
        d,
        &[
            "check",
            "--feed",
            "data.prototxt",
            "--parse-ins-id",
            "train.ms",
        ],
    );
    assert!(
        checked.contains("all 10 lines in 1 files are good"),
        "{checked}"
    );
    let evaluated = ok(
        d,
        &[
            "eval",
            "--model",
            "m.ckpt",
            "--feed",
            "data.prototxt",
            "--parse-ins-id",
            "train.ms",
        ],
    );
    assert!(evaluated.contains("test: 10 instances"), "{evaluated}");
    let predict = |file: &str, extra: &[&str]| {
        let mut args = vec![
            "predict",
            "--model",
            "m.ckpt",
            "--feed",
            "data.prototxt",
            file,
            "-o",
            "p.tsv",
            "--threads",
            "2",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        hogwild(d, &args)
    };
    let out = predict("train.ms", &["--parse-ins-id"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let with = std::fs::read_to_string(d.join("p.tsv")).unwrap();
    // The same predictions as the lines without ids give, each after its id.
    std::fs::write(d.join("plain.ms"), &plain).unwrap();
    assert!(predict("plain.ms", &[]).status.success());
    let without = std::fs::read_to_string(d.join("p.tsv")).unwrap();
    let expected: String = without
        .lines()
        .enumerate()
        .map(|(i, p)| format!("ins-{i}\t{p}\n"))
        .collect();
    assert_eq!(with, expected);

    // Content and log key: the log key is the id (Paddle's records take it for theirs).
    let full: String = plain
        .lines()
        .enumerate()
        .map(|(i, l)| format!("1 ins-{i} 1 text{i} 1 key{i} {l}\n"))
        .collect();
    std::fs::write(d.join("full.ms"), full).unwrap();
    let all = ["--parse-ins-id", "--parse-content", "--parse-logkey"];
    assert!(predict("full.ms", &all).status.success());
    let keyed = std::fs::read_to_string(d.join("p.tsv")).unwrap();
    assert!(
        keyed.starts_with("key0\t") && keyed.lines().count() == 10,
        "{keyed}"
    );

    // A prefix that does not follow the layout is named: field, file and line.
    std::fs::write(d.join("bad.ms"), format!("{}2 x y 1 3 1 0\n", with_ids)).unwrap();
    let printed = text(
        &hogwild(
            d,
            &[
                "check",
                "--feed",
                "data.prototxt",
                "--parse-ins-id",
                "bad.ms",
            ],
        )
        .stdout,
    );
    assert!(
        printed.contains("bad.ms:11: ins_id: count \"2\" is not 1"),
        "{printed}"
    );
    std::fs::write(d.join("bad.ms"), format!("{}1\n", with_ids)).unwrap();
    let stderr = text(&predict("bad.ms", &["--parse-ins-id"]).stderr);
    assert!(
        stderr.contains("bad.ms:11: ins_id: the line ends before its ins_id"),
        "{stderr}"
    );
    // A log key written without its count.
    std::fs::write(d.join("bad.ms"), "1 ins-0 1 text0 key0 1 3 1 0\n").unwrap();
    let stderr = text(
        &train(
            d,
            &[
                "bad.ms",
                "--parse-ins-id",
                "--parse-content",
                "--parse-logkey",
            ],
        )
        .stderr,
    );
    assert!(
        stderr.contains("bad.ms:1: logkey: count \"key0\" is not 1"),
        "{stderr}"
    );
}

/// Item 7: a used slot that the model reads through no key (the `values` slot `convert --from
/// libsvm` writes, with a config that does not name it) is named by train and check with the key
/// that reads it; once named, or marked unused, nothing is said.
#[test]
fn a_used_slot_the_model_does_not_read_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("train.svm"), "1 3:0.5 7:2\n0 3:1.5\n1 7:0.25\n").unwrap();
    ok(
        d,
        &["convert", "--from", "libsvm", "train.svm", "-o", "train.ms"],
    );
    let config =
        "[model]\nkind = \"lr\"\nbuckets = 64\n\n[optimizer]\nkind = \"adagrad\"\nlr = 0.1\n";
    std::fs::write(d.join("lr.toml"), config).unwrap();
    let expected =
        "used slot \"values\" (float) is read through no key of the model, which trains \
        as if it were absent: add values = { ids = \"values\" } (the value of each id of field \
        \"ids\") or weight_slot = \"values\" (each instance's weight) to [model], or set is_used: \
        false for it in the desc";
    let out = train(d, &["train.ms"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "warning: lr.toml with --feed data.prototxt: {expected}"
        )),
        "{stderr}"
    );
    let checked = ok(
        d,
        &[
            "check",
            "--feed",
            "data.prototxt",
            "--config",
            "lr.toml",
            "train.ms",
        ],
    );
    assert!(checked.contains(expected), "{checked}");
    // With the key, nothing is said.
    let keyed = config.replace(
        "buckets = 64\n",
        "buckets = 64\nvalues = { ids = \"values\" }\n",
    );
    std::fs::write(d.join("lr.toml"), keyed).unwrap();
    let out = train(d, &["train.ms"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("used slot"),
        "{}",
        text(&out.stderr)
    );
    // An explicit field list leaves a uint64 slot out: named with fields and field_numbers.
    std::fs::write(
        d.join("data.prototxt"),
        LR_DESC.replace(
            "  slots { name: \"label\"",
            "  slots { name: \"b\" type: \"uint64\" is_dense: false is_used: true }\n  slots { name: \"label\"",
        ),
    )
    .unwrap();
    std::fs::write(d.join("b.ms"), "1 3 1 4 1 1\n1 5 1 6 1 0\n").unwrap();
    std::fs::write(
        d.join("lr.toml"),
        config.replace("buckets = 64\n", "buckets = 64\nfields = [\"a\"]\n"),
    )
    .unwrap();
    let checked = ok(
        d,
        &[
            "check",
            "--feed",
            "data.prototxt",
            "--config",
            "lr.toml",
            "b.ms",
        ],
    );
    assert!(
        checked.contains(
            "used slot \"b\" (uint64) is read through no key of the model, which trains as if it \
             were absent: add \"b\" to fields, or field_numbers = { FIELD = \"b\" }"
        ),
        "{checked}"
    );
}
