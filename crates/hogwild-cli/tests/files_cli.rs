//! How `hogwild` treats a user's files: piped input read whole at any thread count, `-` for
//! standard input and output, outputs replaced only once whole and never over an input, a
//! data.prototxt never rewritten silently, and temporaries of killed saves cleaned up.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::{command, hogwild};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts that the command succeeded; returns its standard output.
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Asserts that the command failed; returns its standard error.
fn refused(out: &Output) -> String {
    assert!(!out.status.success(), "stdout: {}", text(&out.stdout));
    text(&out.stderr)
}

/// Runs `hogwild args` with `input` on its standard input (a pipe).
fn with_stdin(dir: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = command(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // A command that stops reading early closes the pipe: the write's error is no concern here.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// Runs `hogwild args`, where `args` name the named pipe `fifo` (in `dir`), while a thread writes
/// `input` into it.
fn through_fifo(dir: &Path, fifo: &str, args: &[&str], input: &[u8]) -> Output {
    let path = dir.join(fifo);
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
    let writer = {
        let (path, input) = (path.clone(), input.to_vec());
        // Opening blocks until the command opens the pipe; its write error (the command stopped
        // reading) is no concern here.
        std::thread::spawn(move || {
            let _ = std::fs::write(path, input);
        })
    };
    let out = command(dir, args).output().unwrap();
    // A command that failed before opening the pipe leaves the writer waiting for a reader:
    // this one lets it go.
    use std::os::unix::fs::OpenOptionsExt;
    let _unblock = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .unwrap();
    writer.join().unwrap();
    std::fs::remove_file(&path).unwrap();
    out
}

/// The files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn temporaries(dir: &Path) -> Vec<String> {
    listing(dir)
        .into_iter()
        .filter(|n| n.contains(".tmp."))
        .collect()
}

/// Logistic regression over 2000 lines in `dir` ([`lr_setup`], labels `i % 7 > 2`); returns the
/// data.
fn lr_setup(dir: &Path) -> String {
    let data: String = (0..2000)
        .map(|i| format!("1 {} 1 {}\n", i % 7, (i % 7 > 2) as u8))
        .collect();
    common::lr_setup(dir, &data);
    data
}

/// A pid that no process has: that of a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Piped input at two threads (readers split plain files into byte ranges and used to probe the
/// pipe for gzip, losing its first two bytes): a named pipe and `-` give what the file gives.
#[test]
fn piped_input_is_read_whole_at_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = lr_setup(d);
    let train = |input: &'static str| {
        [
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            input,
            "--threads",
            "2",
            "--save",
            "m.ckpt",
            "--print-period",
            "0",
        ]
    };
    for (how, out) in [
        (
            "fifo",
            through_fifo(d, "pipe", &train("pipe"), data.as_bytes()),
        ),
        ("stdin", with_stdin(d, &train("-"), data.as_bytes())),
    ] {
        let stdout = ok(&out);
        assert!(
            stdout.contains("epoch 1: 2000 instances in "),
            "{how}: {stdout}"
        );
    }

    // Predictions of one model are exact: the file, the named pipe and standard input (written
    // to standard output) give the same lines, at two threads.
    let predict = |input: &'static str, output: &'static str| {
        [
            "predict",
            "--model",
            "m.ckpt",
            "--feed",
            "data.prototxt",
            input,
            "-o",
            output,
            "--threads",
            "2",
        ]
    };
    ok(&hogwild(d, &predict("train.ms", "file.pred")));
    let expected = std::fs::read_to_string(d.join("file.pred")).unwrap();
    assert_eq!(expected.lines().count(), 2000);
    ok(&through_fifo(
        d,
        "pipe",
        &predict("pipe", "fifo.pred"),
        data.as_bytes(),
    ));
    assert_eq!(
        std::fs::read_to_string(d.join("fifo.pred")).unwrap(),
        expected
    );
    let out = with_stdin(d, &predict("-", "-"), data.as_bytes());
    assert_eq!(
        ok(&out),
        expected,
        "standard output holds the predictions only"
    );
    assert!(text(&out.stderr).contains("wrote 2000 predictions to standard output"));

    // Evaluation streams the input through two readers.
    let eval = |input: &'static str| {
        [
            "eval",
            "--model",
            "m.ckpt",
            "--feed",
            "data.prototxt",
            input,
            "--threads",
            "2",
        ]
    };
    let out = with_stdin(d, &eval("-"), data.as_bytes());
    assert!(
        ok(&out).starts_with("test: 2000 instances"),
        "{}",
        text(&out.stdout)
    );

    // Standard input can be read once: named twice, or under --stream, it is refused.
    let twice = with_stdin(d, &["check", "--desc", "data.prototxt", "-", "-"], b"");
    assert!(refused(&twice).contains("more than once"));
    std::fs::remove_file(d.join("m.ckpt")).unwrap();
    let stream = [&train("-")[..], &["--stream"]].concat();
    let err = refused(&with_stdin(d, &stream, data.as_bytes()));
    assert!(
        err.contains("standard input (-) is a pipe") && err.contains("--stream"),
        "{err}"
    );
    assert!(!d.join("m.ckpt").exists());
}

/// `-o -` writes to standard output, and the command's own messages go to standard error.
#[test]
fn outputs_go_to_standard_output_with_a_dash() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("x.svm"), "1 3:0.5 7:1\n0 2:0.25\n").unwrap();
    let convert = |output: &'static str| ["convert", "--from", "libsvm", "x.svm", "-o", output];
    ok(&hogwild(d, &convert("x.ms")));
    let expected = std::fs::read_to_string(d.join("x.ms")).unwrap();
    let out = hogwild(d, &convert("-"));
    assert_eq!(ok(&out), expected);
    assert!(
        text(&out.stderr).contains("2 lines -> standard output (desc: data.prototxt, unchanged)")
    );

    // word2vec vectors.
    std::fs::write(
        d.join("w2v.prototxt"),
        "name: \"MultiSlotDataFeed\"\nbatch_size: 4\nmulti_slot_desc {\n  \
         slots { name: \"words\" type: \"uint64\" is_dense: false is_used: true }\n}\n",
    )
    .unwrap();
    std::fs::write(d.join("text.txt"), "the cat sat\nthe dog sat\n".repeat(20)).unwrap();
    std::fs::write(
        d.join("w2v.toml"),
        format!(
            "[model]\nkind = \"word2vec\"\ninput = \"text\"\nvocab_file = \"{}\"\ndim = 4\n\
             min_count = 1\n\n[optimizer]\nkind = \"sgd\"\nlr = 0.025\n",
            d.join("vocab.txt").display()
        ),
    )
    .unwrap();
    ok(&hogwild(
        d,
        &[
            "train",
            "--config",
            "w2v.toml",
            "--feed",
            "w2v.prototxt",
            "text.txt",
            "--threads",
            "1",
            "--save",
            "w2v.ckpt",
            "--quiet",
        ],
    ));
    ok(&hogwild(
        d,
        &["export", "--model", "w2v.ckpt", "-o", "v.txt"],
    ));
    let out = hogwild(d, &["export", "--model", "w2v.ckpt", "-o", "-"]);
    assert_eq!(ok(&out), std::fs::read_to_string(d.join("v.txt")).unwrap());
    assert!(text(&out.stderr).contains("to standard output"));
    // The model is no output.
    let before = std::fs::read(d.join("w2v.ckpt")).unwrap();
    let err = refused(&hogwild(
        d,
        &["export", "--model", "w2v.ckpt", "-o", "./w2v.ckpt"],
    ));
    assert!(err.contains("would destroy the input"), "{err}");
    assert_eq!(std::fs::read(d.join("w2v.ckpt")).unwrap(), before);
}

/// A prediction run whose input is missing leaves an existing output as it was.
#[test]
fn predict_checks_its_inputs_before_touching_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lr_setup(d);
    ok(&hogwild(
        d,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--save",
            "m.ckpt",
            "--quiet",
        ],
    ));
    std::fs::write(d.join("out"), "yesterday's predictions\n").unwrap();
    let before = listing(d);
    let predict = |files: &[&str], output: &str| {
        let args = [
            &["predict", "--model", "m.ckpt", "--feed", "data.prototxt"][..],
            files,
            &["-o", output],
        ]
        .concat();
        hogwild(d, &args)
    };
    let err = refused(&predict(&["train.ms", "missing.ms"], "out"));
    assert!(err.contains("missing.ms: cannot read"), "{err}");
    assert_eq!(
        std::fs::read_to_string(d.join("out")).unwrap(),
        "yesterday's predictions\n"
    );
    assert_eq!(listing(d), before, "nothing created, nothing left behind");
    // The output may be none of the inputs.
    for input in ["train.ms", "m.ckpt", "data.prototxt"] {
        let err = refused(&predict(&["train.ms"], &format!("./{input}")));
        assert!(err.contains("would destroy the input"), "{input}: {err}");
    }
    assert_eq!(listing(d), before);
    // Without a problem the output is replaced.
    ok(&predict(&["train.ms"], "out"));
    assert_eq!(
        std::fs::read_to_string(d.join("out"))
            .unwrap()
            .lines()
            .count(),
        2000
    );
}

/// `convert` never writes over its input or its vocabulary, and never rewrites a data.prototxt
/// with other content unless told to.
#[test]
fn convert_keeps_inputs_and_an_existing_prototxt() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let svm = "1 3:0.5 7:1\n0 2:0.25\n";
    std::fs::write(d.join("x.txt"), svm).unwrap();
    let err = refused(&hogwild(
        d,
        &["convert", "--from", "libsvm", "x.txt", "-o", "x.txt"],
    ));
    assert!(
        err.contains("the output x.txt is the input x.txt: writing it would destroy the input"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(d.join("x.txt")).unwrap(), svm);
    assert_eq!(listing(d), ["x.txt"]);

    // A vocabulary built from the input is no input either.
    let fasttext = "__label__a good\n__label__b bad\n";
    std::fs::write(d.join("t.txt"), fasttext).unwrap();
    let err = refused(&hogwild(
        d,
        &[
            "convert",
            "--from",
            "fasttext",
            "t.txt",
            "-o",
            "t.ms",
            "--build-vocab",
            "--vocab",
            "t.txt",
        ],
    ));
    assert!(
        err.contains("the vocabulary t.txt is the input t.txt"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(d.join("t.txt")).unwrap(), fasttext);
    assert_eq!(listing(d), ["t.txt", "x.txt"]);

    // The same desc again is fine and says so; another one is refused, and nothing is written.
    ok(&hogwild(
        d,
        &["convert", "--from", "libsvm", "x.txt", "-o", "train.ms"],
    ));
    let out = ok(&hogwild(
        d,
        &["convert", "--from", "libsvm", "x.txt", "-o", "test.ms"],
    ));
    assert!(out.contains("(desc: data.prototxt, unchanged)"), "{out}");
    let mine = std::fs::read_to_string(d.join("data.prototxt"))
        .unwrap()
        .replace("batch_size: 32", "batch_size: 64");
    std::fs::write(d.join("data.prototxt"), &mine).unwrap();
    std::fs::remove_file(d.join("test.ms")).unwrap();
    let err = refused(&hogwild(
        d,
        &["convert", "--from", "libsvm", "x.txt", "-o", "test.ms"],
    ));
    assert!(
        err.contains("data.prototxt exists and differs")
            && err.contains("\"batch_size: 64\" there, \"batch_size: 32\" here")
            && err.contains("--prototxt")
            && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("data.prototxt")).unwrap(),
        mine
    );
    assert!(!d.join("test.ms").exists());
    // Elsewhere, or replaced when asked.
    let convert = |extra: &[&str]| {
        let args = [
            &["convert", "--from", "libsvm", "x.txt", "-o", "test.ms"][..],
            extra,
        ]
        .concat();
        ok(&hogwild(d, &args))
    };
    convert(&["--prototxt", "test.prototxt"]);
    assert_eq!(
        std::fs::read_to_string(d.join("data.prototxt")).unwrap(),
        mine
    );
    assert!(d.join("test.prototxt").exists());
    let out = convert(&["--force"]);
    assert!(out.contains("replaced: its content differed"), "{out}");
    assert!(std::fs::read_to_string(d.join("data.prototxt"))
        .unwrap()
        .contains("batch_size: 32"));
    assert!(temporaries(d).is_empty());
}

/// A conversion that fails midway leaves no partial output, and an existing output, vocabulary
/// and desc as they were.
#[test]
fn a_failed_conversion_leaves_every_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Far more than the output's buffer, so that output was written before the bad line.
    let mut input = "__label__a good movie\n__label__b bad movie\n".repeat(20_000);
    // Line 40002 has no label.
    input.push_str("__label__a fine\n\n__label__b last\n");
    std::fs::write(d.join("big.txt"), &input).unwrap();
    let convert = [
        "convert",
        "--from",
        "fasttext",
        "big.txt",
        "-o",
        "big.ms",
        "--build-vocab",
        "--vocab",
        "vocab.txt",
    ];
    let err = refused(&hogwild(d, &convert));
    assert!(err.contains("big.txt:40002"), "{err}");
    assert_eq!(listing(d), ["big.txt"], "no partial output");

    for (name, content) in [
        ("big.ms", "old output\n"),
        ("vocab.txt", "label\t__label__old\n"),
        ("data.prototxt", "old desc\n"),
    ] {
        std::fs::write(d.join(name), content).unwrap();
    }
    let err = refused(&hogwild(d, &[&convert[..], &["--force"]].concat()));
    assert!(err.contains("big.txt:40002"), "{err}");
    assert_eq!(
        std::fs::read_to_string(d.join("big.ms")).unwrap(),
        "old output\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("vocab.txt")).unwrap(),
        "label\t__label__old\n"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("data.prototxt")).unwrap(),
        "old desc\n"
    );
    assert_eq!(
        listing(d),
        ["big.ms", "big.txt", "data.prototxt", "vocab.txt"]
    );
}

/// A save removes the temporaries that killed saves of the same checkpoint left, and says how
/// many and how large; a running writer's temporary is kept.
#[test]
fn a_save_removes_the_stale_temporaries_of_killed_saves() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    lr_setup(d);
    let dead = dead_pid();
    std::fs::write(d.join(format!("m.ckpt.tmp.{dead}.0")), vec![0u8; 1000]).unwrap();
    std::fs::write(d.join(format!("m.ckpt.tmp.{dead}.3")), vec![0u8; 536]).unwrap();
    // This test's own process is running.
    let live = format!("m.ckpt.tmp.{}.0", std::process::id());
    std::fs::write(d.join(&live), "x").unwrap();
    let train = [
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--save",
        "m.ckpt",
        "--quiet",
    ];
    let out = ok(&hogwild(d, &train));
    let removed: Vec<&str> = out.lines().filter(|l| l.starts_with("removed ")).collect();
    assert_eq!(
        removed,
        ["removed 2 stale temporary files of m.ckpt (1.5 KiB) left by interrupted writes"],
        "{out}"
    );
    assert_eq!(temporaries(d), [live]);
    // Nothing more to remove: nothing said.
    let out = ok(&hogwild(d, &train));
    assert!(!out.contains("removed "), "{out}");
}

/// 10 runs saving every epoch, each killed (`kill -9`) at a random moment, then a normal run:
/// the checkpoint left is a whole save (the very bytes an uninterrupted run saves after some
/// epoch), it resumes exactly as that save does, and no temporary file remains.
#[test]
fn kill_9_during_periodic_saves_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("data.prototxt"),
        "name: \"MultiSlotDataFeed\"\nbatch_size: 32\nmulti_slot_desc {\n  \
         slots { name: \"words\" type: \"uint64\" is_dense: false is_used: true }\n  \
         slots { name: \"label\" type: \"uint64\" is_dense: false is_used: true }\n}\n",
    )
    .unwrap();
    // A 12 MB checkpoint, so that a good share of each run is spent saving; a constant learning
    // rate at one thread, so that a run's state after epoch k is that of a k-epoch run.
    std::fs::write(
        d.join("bow.toml"),
        "[model]\nkind = \"bow\"\nvocab = 100000\nclasses = 2\ndim = 16\n\
         lr_schedule = \"constant\"\nseed = 1\n\n[optimizer]\nkind = \"adagrad\"\nlr = 0.1\n",
    )
    .unwrap();
    let mut rng = Rng(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1);
    let seed = rng.0;
    let data: String = (0..2000)
        .map(|i| {
            let words: Vec<String> = (0..1 + i % 8)
                .map(|k| ((i * 7919 + k * 104_729) % 100_000).to_string())
                .collect();
            format!("{} {} 1 {}\n", words.len(), words.join(" "), i % 2)
        })
        .collect();
    std::fs::write(d.join("train.ms"), data).unwrap();
    const EPOCHS: usize = 6;
    let epoch_counts: Vec<String> = (0..=EPOCHS).map(|k| k.to_string()).collect();
    let train = |epochs: usize, save: &'static str| {
        [
            "train",
            "--config",
            "bow.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--threads",
            "1",
            "--epochs",
            &epoch_counts[epochs],
            "--save-every",
            "0",
            "--save",
            save,
            "--quiet",
        ]
    };

    // How long an uninterrupted run takes, to kill within it.
    let started = std::time::Instant::now();
    ok(&hogwild(d, &train(EPOCHS, "full.ckpt")));
    let run_time = started.elapsed();

    for _ in 0..10 {
        let mut child = command(d, &train(EPOCHS, "m.ckpt"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(run_time.mul_f64(rng.unit()));
        // SIGKILL, as `kill -9` sends it (a run that ended already is not signalled).
        let _ = child.kill();
        child.wait().unwrap();
    }
    let left = temporaries(d);
    eprintln!(
        "seed {seed}: {} temporaries left by the killed runs: {left:?}",
        left.len()
    );
    assert!(
        d.join("m.ckpt").exists(),
        "seed {seed}: no killed run got to its first save"
    );
    let last = std::fs::read(d.join("m.ckpt")).unwrap();

    // The checkpoint is a whole save: the bytes some uninterrupted run saves.
    let epoch = (1..=EPOCHS)
        .find(|&k| {
            ok(&hogwild(d, &train(k, "ref.ckpt")));
            std::fs::read(d.join("ref.ckpt")).unwrap() == last
        })
        .unwrap_or_else(|| panic!("seed {seed}: m.ckpt is no epoch's save"));
    eprintln!("seed {seed}: the checkpoint left is epoch {epoch}'s");

    // A normal run resumes it, exactly as it resumes that save, and removes the temporaries.
    let resume = |from: &'static str, save: &'static str| {
        [
            "train",
            "--resume",
            from,
            "--feed",
            "data.prototxt",
            "train.ms",
            "--threads",
            "1",
            "--epochs",
            "2",
            "--save-every",
            "0",
            "--save",
            save,
            "--quiet",
        ]
    };
    let out = ok(&hogwild(d, &resume("m.ckpt", "m.ckpt")));
    if !left.is_empty() {
        let line = format!("removed {} stale temporary file", left.len());
        assert!(out.contains(&line), "seed {seed}: {out}");
    }
    ok(&hogwild(d, &resume("ref.ckpt", "ref-resumed.ckpt")));
    assert_eq!(
        std::fs::read(d.join("m.ckpt")).unwrap(),
        std::fs::read(d.join("ref-resumed.ckpt")).unwrap(),
        "seed {seed}: resumed from epoch {epoch}"
    );
    assert_eq!(temporaries(d), Vec::<String>::new(), "seed {seed}");
}

/// xorshift64: the kill times (seeded from the clock; the seed is printed).
struct Rng(u64);

impl Rng {
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}
