//! Ctrl-C (SIGINT) and SIGTERM during `hogwild train`, `eval` and `predict`, as a user sends
//! them: the first stops the run cleanly (training saves what it trained), a second quits at
//! once, and the exit status is the signal's (130, 143).
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod common;
use common::{hogwild, lr_lines, lr_setup};

/// A logistic-regression setup in `dir` with `lines` lines of data in `train.ms`.
fn setup(dir: &Path, lines: usize) {
    lr_setup(dir, &lr_lines(lines));
}

/// A running `hogwild` and its output, line by line as it comes.
struct Running {
    child: Child,
    stdout: Receiver<String>,
    stdout_all: JoinHandle<Vec<String>>,
    stderr: Receiver<String>,
    stderr_all: JoinHandle<Vec<String>>,
}

/// Sends every line of `reader` as it comes, and returns them all at its end.
fn lines(reader: impl Read + Send + 'static) -> (Receiver<String>, JoinHandle<Vec<String>>) {
    let (send, receive) = channel();
    let all = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in BufReader::new(reader).lines().map_while(|l| l.ok()) {
            let _ = send.send(line.clone());
            all.push(line);
        }
        all
    });
    (receive, all)
}

fn spawn(dir: &Path, args: &[&str]) -> Running {
    let mut child = common::command(dir, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the hogwild binary runs");
    let (stdout, stdout_all) = lines(child.stdout.take().unwrap());
    let (stderr, stderr_all) = lines(child.stderr.take().unwrap());
    Running {
        child,
        stdout,
        stdout_all,
        stderr,
        stderr_all,
    }
}

/// Waits (at most a minute) for a line that starts with `prefix`.
fn wait_for(lines: &Receiver<String>, prefix: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(line) if line.starts_with(prefix) => return line,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    panic!("no line starting with {prefix:?}");
}

fn signal(run: &Running, signal: i32) {
    // SAFETY: kill(2) on the pid of a child this test started and has not waited for yet; it has
    // no memory-safety preconditions.
    let sent = unsafe { libc::kill(run.child.id() as libc::pid_t, signal) };
    assert_eq!(sent, 0, "kill failed");
}

/// The exit code, stdout and stderr of `run`, which must end within `limit`.
fn finish(mut run: Running, limit: Duration) -> (Option<i32>, Vec<String>, Vec<String>) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = run.child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = run.child.kill();
            let _ = run.child.wait();
            panic!("hogwild did not end within {limit:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = run.stdout_all.join().unwrap();
    let stderr = run.stderr_all.join().unwrap();
    (status.code(), stdout, stderr)
}

/// The epochs a "saved" line says the checkpoint holds: `saved m.ckpt: N epochs and ...`.
fn saved_epochs(line: &str) -> usize {
    let after = line.split(": ").nth(1).unwrap();
    after.split(' ').next().unwrap().parse().unwrap()
}

/// `hogwild train` of `lr.toml` on `data` for `epochs` epochs, 2 threads, no progress lines.
fn train_args<'a>(data: &'a str, epochs: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "--config",
        "lr.toml",
        "--feed",
        "data.prototxt",
        data,
        "--epochs",
        epochs,
        "--threads",
        "2",
        "--print-period",
        "0",
    ];
    args.extend_from_slice(extra);
    args
}

/// Epochs no test waits for.
const ENDLESS: &str = "100000";

/// Stops a long run with `sig` after its second epoch; checks the exit status, what was said and
/// that the checkpoint holds the epochs said: it loads, evaluates, and a resumed run numbers its
/// epochs after them.
fn stop_and_resume(sig: i32, status: i32, name: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d, 20_000);
    let extra = [&["--save", "m.ckpt"], extra].concat();
    let run = spawn(d, &train_args("train.ms", ENDLESS, &extra));
    wait_for(&run.stdout, "epoch 2:");
    signal(&run, sig);
    let (code, stdout, stderr) = finish(run, Duration::from_secs(60));
    let stderr = stderr.join("\n");
    assert_eq!(code, Some(status), "{stderr}");
    assert!(
        stderr.contains(&format!("{name}: stopping after the current batches")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("training stopped by {name}")),
        "{stderr}"
    );
    let saved = stdout
        .iter()
        .find(|l| l.starts_with("saved m.ckpt: "))
        .unwrap_or_else(|| panic!("no saved line: {stdout:?}"));
    assert!(saved.contains("--resume m.ckpt"), "{saved}");
    let epochs = saved_epochs(saved);
    assert!(epochs >= 2, "{saved}");

    let out = hogwild(
        d,
        &[
            "eval",
            "--model",
            "m.ckpt",
            "--feed",
            "data.prototxt",
            "train.ms",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with("test: 20000 instances") && text.contains("loss"),
        "{text}"
    );

    let out = hogwild(
        d,
        &[
            "train",
            "--resume",
            "m.ckpt",
            "--feed",
            "data.prototxt",
            "train.ms",
            "--threads",
            "1",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with(&format!("epoch {}: 20000 instances", epochs + 1)),
        "{text}"
    );
}

#[test]
fn sigint_stops_training_saves_what_was_trained_and_exits_130() {
    stop_and_resume(libc::SIGINT, 130, "SIGINT", &[]);
}

#[test]
fn sigterm_stops_a_streaming_run_likewise_and_exits_143() {
    stop_and_resume(libc::SIGTERM, 143, "SIGTERM", &["--stream"]);
}

#[test]
fn without_save_a_stopped_run_says_nothing_was_saved() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d, 20_000);
    let run = spawn(d, &train_args("train.ms", ENDLESS, &[]));
    wait_for(&run.stdout, "epoch 1:");
    signal(&run, libc::SIGINT);
    let (code, stdout, stderr) = finish(run, Duration::from_secs(60));
    assert_eq!(code, Some(130), "{stderr:?}");
    assert!(
        stdout
            .iter()
            .any(|l| l.starts_with("not saved (no --save): ")),
        "{stdout:?}"
    );
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 3, "no file written");
}

/// A FIFO in `dir` and its writer, handed back once a reader's open lets it through (and kept
/// open, so that the reader waits for lines). It writes nothing: a line is not needed to show
/// that a run waiting on its input stops, and it would not arrive whole (the feed's gzip probe
/// takes a pipe's first bytes, a known bug being fixed apart).
fn fifo(dir: &Path, name: &str) -> (std::path::PathBuf, Receiver<std::fs::File>) {
    let path = dir.join(name);
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success());
    let (send, receive) = channel();
    let at = path.clone();
    std::thread::spawn(move || {
        let writer = std::fs::OpenOptions::new().write(true).open(at).unwrap();
        let _ = send.send(writer);
    });
    (path, receive)
}

// A run stuck where a first signal cannot stop it (loading data that never ends) quits on the
// second at once, with the signal's status, having written nothing.
#[test]
fn a_second_signal_quits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d, 10);
    let (_, writer) = fifo(d, "pipe.ms");
    let run = spawn(d, &train_args("pipe.ms", "1", &["--save", "m.ckpt"]));
    // The reader has opened the pipe: the handlers are in place and the load waits for its end.
    let _writer = writer.recv_timeout(Duration::from_secs(60)).unwrap();
    signal(&run, libc::SIGINT);
    wait_for(&run.stderr, "SIGINT: stopping");
    signal(&run, libc::SIGINT);
    let (code, _, _) = finish(run, Duration::from_secs(10));
    assert_eq!(code, Some(130));
    assert!(!d.join("m.ckpt").exists());
}

// Evaluation and predictions stopped by a signal are errors, not a result over part of the
// data: each ends with the signal's status once its (endless) input is let go.
#[test]
fn stopped_evaluations_and_predictions_fail() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d, 100);
    let out = hogwild(d, &train_args("train.ms", "1", &["--save", "m.ckpt"]));
    assert!(out.status.success(), "{out:?}");
    for (command, what) in [("eval", "evaluation"), ("predict", "prediction")] {
        let name = format!("{command}.ms");
        let (_, writer) = fifo(d, &name);
        let mut args = vec![
            command,
            "--model",
            "m.ckpt",
            "--feed",
            "data.prototxt",
            &name,
            "--threads",
            "1",
        ];
        if command == "predict" {
            args.extend(["-o", "p.txt"]);
        }
        let run = spawn(d, &args);
        let writer = writer.recv_timeout(Duration::from_secs(60)).unwrap();
        signal(&run, libc::SIGTERM);
        wait_for(&run.stderr, "SIGTERM: stopping");
        drop(writer);
        let (code, stdout, stderr) = finish(run, Duration::from_secs(60));
        assert_eq!(code, Some(143), "{command}: {stdout:?} {stderr:?}");
        let stderr = stderr.join("\n");
        assert!(
            stderr.contains(&format!("{what} stopped on request")),
            "{command}: {stderr}"
        );
        assert!(stdout.is_empty(), "{command}: no result: {stdout:?}");
    }
}

/// Ctrl-C during `train --budget`: the search ends with the trial it was training (not counted),
/// the best model so far stays in the --save file, and the command fails with SIGINT's status.
#[test]
fn ctrl_c_keeps_the_best_model_of_a_search() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d, 2_000);
    std::fs::write(d.join("valid.ms"), lr_lines(500)).unwrap();
    let run = spawn(
        d,
        &train_args(
            "train.ms",
            "3",
            &[
                "--validation",
                "valid.ms",
                "--budget",
                "600",
                "--save",
                "best.ckpt",
            ],
        ),
    );
    wait_for(&run.stdout, "trial 2:");
    signal(&run, libc::SIGINT);
    let (code, stdout, stderr) = finish(run, Duration::from_secs(60));
    let stderr = stderr.join("\n");
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("search stopped by SIGINT"), "{stderr}");
    let summary = stdout
        .iter()
        .find(|l| l.starts_with("autotune: best of "))
        .unwrap_or_else(|| panic!("{stdout:?}"));
    assert!(summary.contains("validation auc"), "{summary}");
    assert!(
        stdout
            .iter()
            .any(|l| l.starts_with("saved best.ckpt (trial ")),
        "{stdout:?}"
    );
    let out = hogwild(
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
