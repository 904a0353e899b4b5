//! `hogwild train` as a user runs it: every mistake in an option, an output path or the model
//! config is reported before any data is read, and the run's report says what it measured.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{hogwild, lr_lines, lr_setup};

/// A logistic-regression setup in `dir` ([`lr_setup`]) with 200 lines, and them as `test.ms`.
fn setup(dir: &Path) {
    let lines = lr_lines(200);
    lr_setup(dir, &lines);
    std::fs::write(dir.join("test.ms"), &lines).unwrap();
}

/// A logistic-regression config with `optimizer` and `model` settings.
fn config(optimizer: &str, model: &str) -> String {
    format!("[model]\nkind = \"lr\"\nbuckets = 64\n{model}\n\n[optimizer]\n{optimizer}\n")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `hogwild` in `dir` and fails the test when it runs longer than 30 s: it would be
/// reading the never-ending data (a FIFO no one writes to) instead of refusing an option first.
#[cfg(unix)]
fn refused_fast(dir: &Path, args: &[&str]) -> Output {
    let mut child = common::command(dir, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{args:?} read the data instead of refusing at once: {:?}",
                text(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Whether a file can be created in `dir` (root may write where the permissions say not).
#[cfg(unix)]
fn writable(dir: &Path) -> bool {
    tempfile::tempfile_in(dir).is_ok()
}

#[cfg(unix)]
#[test]
fn bad_options_outputs_and_configs_are_refused_before_the_data_is_read() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    // Training data that never ends: reading it would hang the test.
    assert!(Command::new("mkfifo")
        .arg(d.join("endless.ms"))
        .status()
        .unwrap()
        .success());
    std::fs::create_dir(d.join("models")).unwrap();
    std::fs::create_dir(d.join("read-only")).unwrap();
    std::fs::set_permissions(d.join("read-only"), std::fs::Permissions::from_mode(0o555)).unwrap();
    let bad_configs = [
        (
            "lr-neg.toml",
            config("kind = \"sgd\"\nlr = -1", ""),
            "optimizer.lr",
            "-1",
        ),
        (
            "lr-zero.toml",
            config("kind = \"sgd\"\nlr = 0", ""),
            "optimizer.lr",
            "0",
        ),
        (
            "lr-nan.toml",
            config("kind = \"adagrad\"\nlr = nan", ""),
            "optimizer.lr",
            "NaN",
        ),
        (
            "beta1.toml",
            config("kind = \"adam_async\"\nlr = 0.01\nbeta1 = 1.5", ""),
            "optimizer.beta1",
            "1.5",
        ),
        (
            "beta2.toml",
            config("kind = \"adam_async\"\nlr = 0.01\nbeta2 = 1", ""),
            "optimizer.beta2",
            "1",
        ),
        (
            "epsilon.toml",
            config("kind = \"adam_async\"\nlr = 0.01\nepsilon = -1", ""),
            "optimizer.epsilon",
            "-1",
        ),
        (
            "accumulator.toml",
            config(
                "kind = \"adagrad\"\nlr = 0.1\ninitial_accumulator = -0.1",
                "",
            ),
            "optimizer.initial_accumulator",
            "-0.1",
        ),
        (
            "l2.toml",
            config("kind = \"sgd\"\nlr = 0.1", "l2 = -1"),
            "l2",
            "-1",
        ),
        (
            "weight.toml",
            config("kind = \"sgd\"\nlr = 0.1", "weight_slot = \"weight\""),
            "weight_slot",
            "\"weight\"",
        ),
    ];
    for (name, text, _, _) in &bad_configs {
        std::fs::write(d.join(name), text).unwrap();
    }
    let train = |config: &str| {
        vec![
            "train".to_string(),
            "--config".into(),
            config.into(),
            "--feed".into(),
            "data.prototxt".into(),
            "endless.ms".into(),
        ]
    };
    let mut cases: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut case = |extra: &[&str], expect: &[&str]| {
        let mut args = train("lr.toml");
        args.extend(extra.iter().map(|s| s.to_string()));
        cases.push((args, expect.iter().map(|s| s.to_string()).collect()));
    };
    case(
        &["--save", "missing/m.ckpt"],
        &["--save missing/m.ckpt", "directory missing does not exist"],
    );
    case(&["--save", "models"], &["--save models", "is a directory"]);
    case(
        &["--test", "none-*"],
        &["--test", "none-*", "no file matches"],
    );
    case(&["--test", "absent.ms"], &["--test file absent.ms"]);
    case(&["--threads", "0"], &["--threads", "'0'", "1 or more"]);
    case(&["--threads", "100000"], &["--threads", "100000", "1024"]);
    case(&["--epochs", "0"], &["--epochs", "'0'", "train nothing"]);
    // Root may write in a directory without write permission: /sys refuses it too.
    for ro in [d.join("read-only"), "/sys".into()] {
        if ro.is_dir() && !writable(&ro) {
            let target = ro.join("m.ckpt").display().to_string();
            case(
                &["--save", &target],
                &[&format!("--save {target}"), "cannot write in"],
            );
        }
    }
    for (name, _, key, value) in &bad_configs {
        let mut args = train(name);
        args.extend(["--save".into(), "m.ckpt".into()]);
        cases.push((
            args,
            vec![name.to_string(), format!("{key}: "), value.to_string()],
        ));
    }
    for (args, expect) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = refused_fast(d, &args);
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{args:?}: {stdout}");
        for part in &expect {
            assert!(
                stderr.contains(part.as_str()),
                "{args:?}: {part:?} in {stderr}"
            );
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(!d.join("m.ckpt").exists(), "{args:?} wrote m.ckpt");
    }
    let mut left: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".toml"))
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "data.prototxt",
            "endless.ms",
            "models",
            "read-only",
            "test.ms",
            "train.ms"
        ],
        "no probe or output left behind"
    );
    assert_eq!(std::fs::read_dir(d.join("models")).unwrap().count(), 0);
}

fn lines_of(out: &Output) -> Vec<String> {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{stderr}");
    stdout.lines().map(str::to_string).collect()
}

#[test]
fn a_resumed_model_numbers_its_epochs_after_those_it_was_trained_for() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let first = [
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--epochs",
        "2",
        "--threads",
        "1",
        "--save",
        "m.ckpt",
    ];
    let lines = lines_of(&hogwild(d, &first));
    assert!(lines[1].starts_with("epoch 2: 200 instances"), "{lines:?}");
    assert!(lines.contains(&"saved m.ckpt (epoch 2)".to_string()));
    let resume = [
        "train",
        "--resume",
        "m.ckpt",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--epochs",
        "2",
        "--threads",
        "1",
        "--save",
        "m.ckpt",
    ];
    let lines = lines_of(&hogwild(d, &resume));
    let epochs: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split(':').next().filter(|e| e.starts_with("epoch ")))
        .collect();
    assert_eq!(epochs, ["epoch 3", "epoch 4"], "{lines:?}");
    assert!(
        lines.contains(&"saved m.ckpt (epoch 4)".to_string()),
        "{lines:?}"
    );
    let lines = lines_of(&hogwild(d, &resume));
    assert!(lines[0].starts_with("epoch 5:"), "{lines:?}");
}

// One thread is "1 thread"; the time the save took is shown apart from training's; --quiet
// prints the results only (what was saved, the test metrics).
#[test]
fn the_report_reads_right_and_quiet_keeps_the_results() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let args = [
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        "train.ms",
        "--threads",
        "1",
        "--save",
        "m.ckpt",
        "--test",
        "test.ms",
    ];
    let lines = lines_of(&hogwild(d, &args));
    assert!(
        lines[0].starts_with("epoch 1: 200 instances in "),
        "{lines:?}"
    );
    assert!(lines[0].contains("/s, 1 thread)"), "{lines:?}");
    let time = lines.iter().find(|l| l.starts_with("time: ")).unwrap();
    assert!(
        time.contains(", training ") && time.contains("s, saving ") && time.contains(", total "),
        "{time}"
    );
    let quiet = [&args[..], &["--quiet"]].concat();
    let out = hogwild(d, &quiet);
    let lines = lines_of(&out);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], "saved m.ckpt (epoch 1)");
    assert!(
        lines[1].starts_with("test: 200 instances  loss "),
        "{lines:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "{stderr}");
}

// More threads than cores run (a user may want it), with a warning.
#[test]
fn more_threads_than_cores_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = (cores + 1).to_string();
    let out = hogwild(
        d,
        &[
            "train",
            "--config",
            "lr.toml",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--threads",
            &threads,
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.starts_with("epoch 1: 200 instances"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "warning: --threads {threads} is more than the {cores} core"
        )),
        "{stderr}"
    );
}
