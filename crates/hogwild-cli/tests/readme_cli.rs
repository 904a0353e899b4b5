//! The walk-throughs of README.md and of the guides in `docs/`, run as a reader runs them: the
//! `sh` blocks after a `<!-- walkthrough: NAME -->` comment, in document order (README.md first,
//! then `docs/*.md` by name), as one `bash -euo pipefail` script per walk-through, in a temporary
//! copy of `examples/` with the built `hogwild` first on PATH. A
//! `<!-- walkthrough-file: PATH -->` comment marks a block that shows a file of the repository;
//! it must be that file, byte for byte. A walk-through without a test of its own below is run by
//! `every_other_walkthrough_runs`, which checks that it succeeds and writes what it names.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (this crate is `crates/hogwild-cli`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a comment before a fenced block says the block is.
#[derive(Debug, PartialEq)]
enum Mark {
    /// Commands of the walk-through of this name.
    Walkthrough(String),
    /// The content of this file (relative to the repository root).
    File(String),
}

/// A marked fenced block of a document: its mark, where it is (`README.md:LINE`, the first line
/// of its text) and its text.
struct Block {
    mark: Mark,
    file: String,
    line: usize,
    text: String,
}

/// Every marked block of `readme`. A mark must be followed at once by a fenced block.
fn marked_blocks(readme: &str) -> Vec<Block> {
    marked_blocks_of("README.md", readme)
}

/// Every marked block of the document `file` (its name in messages), whose text is `doc`.
fn marked_blocks_of(file: &str, doc: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = doc.lines().enumerate();
    while let Some((_, line)) = lines.next() {
        let comment = line.trim();
        let mark = if let Some(rest) = comment.strip_prefix("<!-- walkthrough:") {
            Mark::Walkthrough(rest.trim_end_matches("-->").trim().to_string())
        } else if let Some(rest) = comment.strip_prefix("<!-- walkthrough-file:") {
            Mark::File(rest.trim_end_matches("-->").trim().to_string())
        } else {
            continue;
        };
        let (n, fence) = lines
            .next()
            .unwrap_or_else(|| panic!("{file} ends after a walk-through mark"));
        assert!(
            fence.starts_with("```"),
            "{file}:{}: a fenced block must follow {mark:?}, found {fence:?}",
            n + 1
        );
        let mut text = String::new();
        let mut closed = false;
        for (_, line) in lines.by_ref() {
            if line.starts_with("```") {
                closed = true;
                break;
            }
            text.push_str(line);
            text.push('\n');
        }
        assert!(closed, "{file}:{}: the block is not closed", n + 1);
        blocks.push(Block {
            mark,
            file: file.to_string(),
            line: n + 2,
            text,
        });
    }
    blocks
}

/// The documents whose walk-throughs are run: README.md, then the guides `docs/*.md` by name.
fn documents() -> Vec<PathBuf> {
    let mut guides: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guides.sort();
    std::iter::once(repo().join("README.md"))
        .chain(guides)
        .collect()
}

fn readme_blocks() -> Vec<Block> {
    documents()
        .iter()
        .flat_map(|path| {
            let doc =
                std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path.strip_prefix(repo()).unwrap_or(path);
            marked_blocks_of(&name.display().to_string(), &doc)
        })
        .collect()
}

/// The walk-throughs that have a test of their own in this file.
const TESTED_APART: [&str; 5] = [
    "text-classification",
    "word2vec",
    "ctr",
    "export",
    "export-cluster",
];

/// The script of walk-through `name`: its blocks in README order.
fn script(name: &str) -> String {
    let blocks: Vec<Block> = readme_blocks()
        .into_iter()
        .filter(|b| b.mark == Mark::Walkthrough(name.to_string()))
        .collect();
    assert!(
        !blocks.is_empty(),
        "no document has a walk-through {name:?}"
    );
    for b in &blocks {
        // The commands are what a reader types, with `hogwild` installed.
        assert!(
            !b.text.contains("cargo "),
            "{}:{}: walk-through {name:?} runs cargo; write `hogwild ...`",
            b.file,
            b.line
        );
    }
    blocks.iter().map(|b| b.text.as_str()).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The files a script writes: the argument after each `-o` and `--save`.
fn outputs(script: &str) -> Vec<String> {
    let words: Vec<&str> = script.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0] == "-o" || w[0] == "--save")
        .map(|w| w[1].to_string())
        .collect()
}

/// Runs walk-through `name` in a fresh copy of `examples/`; checks that it succeeded and wrote
/// every output it names. Returns the directory it ran in and what it printed.
fn run_walkthrough(name: &str) -> (tempfile::TempDir, String) {
    let script = script(name);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("examples"), &dir.path().join("examples"));
    let path = dir.path().join("walkthrough.sh");
    std::fs::write(&path, &script).unwrap();
    // As a reader who has built the project: the op library at build/plugin/ (a walk-through
    // with TensorFlow loads it from there) and the project's venv active (`python` is the one
    // with TensorFlow and adam_async).
    let plugin = repo().join("build/plugin");
    if plugin.is_dir() {
        std::fs::create_dir_all(dir.path().join("build")).unwrap();
        std::os::unix::fs::symlink(&plugin, dir.path().join("build/plugin")).unwrap();
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_hogwild")).parent().unwrap();
    let search = std::env::var_os("PATH").unwrap_or_default();
    let search = std::env::join_paths(
        [bin.to_path_buf(), repo().join(".venv/bin")]
            .into_iter()
            .chain(std::env::split_paths(&search)),
    )
    .unwrap();
    let out: Output = Command::new("bash")
        .args(["-euo", "pipefail"])
        .arg(&path)
        .current_dir(dir.path())
        .env("PATH", search)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("bash runs");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "walk-through {name:?} failed ({}):\n{script}\n--- output:\n{printed}",
        out.status
    );
    for file in outputs(&script) {
        // A TensorFlow checkpoint prefix (`tf-train --save`) is written as PREFIX.index.
        let index = dir.path().join(format!("{file}.index"));
        let meta = std::fs::metadata(dir.path().join(&file)).or_else(|_| std::fs::metadata(index));
        assert!(
            meta.is_ok_and(|m| m.len() > 0),
            "walk-through {name:?} did not write {file}:\n{printed}"
        );
    }
    (dir, printed)
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count()
}

#[test]
fn text_classification_walkthrough_runs() {
    let (dir, printed) = run_walkthrough("text-classification");
    // The test file is converted with the training vocabulary and the training desc left alone.
    assert!(
        printed.contains(
            "150 lines -> build/text/test.ms (desc: build/text/data.prototxt, unchanged)"
        ),
        "{printed}"
    );
    // The vocabulary size `convert` asks for is the one the walk-through's model.toml sets.
    let asked = printed
        .lines()
        .find_map(|l| l.trim().strip_prefix("vocab = "))
        .unwrap_or_else(|| panic!("convert names no vocab:\n{printed}"));
    let config = std::fs::read_to_string(repo().join("examples/text/model.toml")).unwrap();
    assert!(
        config.contains(&format!("\nvocab = {asked} ")),
        "convert asks for vocab = {asked}; examples/text/model.toml has another"
    );
    assert!(printed.contains("test: 150 instances"), "{printed}");
    // eval -k 2 --per-label: a line per label, then fastText's N, P@2 and R@2.
    for label in ["sports", "weather", "cooking"] {
        assert!(
            printed.contains(&format!("   __label__{label}\n")),
            "{label}: {printed}"
        );
    }
    assert!(printed.contains("\nN\t150\nP@2\t"), "{printed}");
    // The predictions name the labels (one, or two with their probabilities).
    let read = |file: &str| std::fs::read_to_string(dir.path().join(file)).unwrap();
    let predictions = read("build/text/predictions.txt");
    assert_eq!(predictions.lines().count(), 150);
    assert!(
        predictions
            .lines()
            .all(|l| l.starts_with("__label__") && !l.contains(' ')),
        "{predictions}"
    );
    let two = read("build/text/predictions-k2.txt");
    assert_eq!(two.lines().count(), 150);
    assert!(two.lines().all(|l| l.split(' ').count() == 4), "{two}");
    // The search: its first trial is model.toml as given, its best model saved.
    assert!(
        printed.contains("trial 1: lr 0.5000 dim 16 epochs 5 bigrams on: validation accuracy"),
        "{printed}"
    );
    assert!(printed.contains("autotune: best of "), "{printed}");
    assert!(dir.path().join("build/text/tuned.ckpt").exists());
    // New words the training text lacks, classified by their character n-grams.
    assert_eq!(
        read("build/subwords/predictions.txt"),
        "__label__sports\n__label__cooking\n"
    );
}

#[test]
fn word2vec_walkthrough_runs() {
    let (dir, printed) = run_walkthrough("word2vec");
    // nn -k 5 and analogy -k 3 on the skip-gram model, nn -k 5 on the CBOW one and on the
    // hierarchical-softmax one, nn -k 3 of a misspelling on the subword one:
    // `word<TAB>similarity` lines.
    let answers = printed
        .lines()
        .filter(|l| {
            l.split_once('\t')
                .is_some_and(|(_, s)| s.len() >= 8 && s.parse::<f32>().is_ok())
        })
        .count();
    assert_eq!(answers, 5 + 3 + 5 + 5 + 3, "{printed}");
    // word-vectors of two misspellings: `word v1 ... v50` lines.
    for word in ["temprature", "umbrela"] {
        let line = printed.lines().find(|l| l.starts_with(&format!("{word} ")));
        let values = line.map_or(0, |l| {
            l.split(' ')
                .skip(1)
                .filter(|x| x.parse::<f32>().is_ok())
                .count()
        });
        assert_eq!(values, 50, "{word}: {printed}");
    }
    let hs = std::fs::read_to_string(dir.path().join("build/word2vec/hs.toml")).unwrap();
    assert!(hs.contains("\nnegative = 0\nhs = true\n"), "{hs}");
    // analogy --questions: one question of six has a word the corpus lacks ("pizza").
    for line in [
        "\nQuadruplets with out-of-vocabulary words: 16.7%\n",
        "\nTotal accuracy: ",
        "\nskipped: 1 of 6 questions, with a word outside the first ",
    ] {
        assert!(printed.contains(line), "{line:?}: {printed}");
    }
    let vectors = std::fs::read_to_string(dir.path().join("build/word2vec/vectors.txt")).unwrap();
    let header = vectors.lines().next().unwrap_or_default();
    let words: usize = header.split(' ').next().unwrap().parse().unwrap();
    assert!(header.ends_with(" 50"), "{header}");
    assert_eq!(vectors.lines().count(), words + 1);
}

#[test]
fn ctr_walkthrough_runs() {
    let (dir, printed) = run_walkthrough("ctr");
    for (file, n) in [
        ("build/ctr/fm.pred", 5000),
        ("build/ctr/libffm/test.pred", 1000),
    ] {
        assert_eq!(lines(&dir.path().join(file)), n, "{file}");
    }
    // Every training run scored its test set, and both eval runs printed theirs.
    assert_eq!(
        printed.matches("test: 5000 instances").count(),
        2 + 1,
        "{printed}"
    );
    assert_eq!(
        printed.matches("test: 1000 instances").count(),
        3 + 1 + 1,
        "{printed}"
    );
    // The field-aware machine's run shows the validation AUC per epoch, and its saved file is
    // the best epoch's: `eval` gives the AUC that epoch printed.
    let best = printed
        .lines()
        .find_map(|l| l.strip_prefix("build/ctr/libffm/ffm.ckpt holds epoch "))
        .unwrap_or_else(|| panic!("{printed}"));
    let (_, auc) = best.split_once("(auc ").unwrap();
    let auc = auc.trim_end_matches(')');
    assert!(printed.contains("validation auc "), "{printed}");
    // `eval`'s line (the epoch lines read `validation auc`).
    assert!(printed.contains(&format!("  auc {auc}")), "{printed}");
}

#[test]
fn readme_shows_the_files_as_they_are() {
    let files: Vec<Block> = readme_blocks()
        .into_iter()
        .filter(|b| matches!(b.mark, Mark::File(_)))
        .collect();
    assert!(!files.is_empty(), "no document marks a file block");
    for b in files {
        let Mark::File(path) = &b.mark else {
            unreachable!()
        };
        let file = std::fs::read_to_string(repo().join(path)).unwrap();
        assert_eq!(
            b.text, file,
            "{}:{}: the block differs from {path}",
            b.file, b.line
        );
    }
}

/// docs/export.md: the exported SavedModel predicts the walk-through's labels in Python.
#[cfg(feature = "tf")]
#[test]
fn export_walkthrough_runs() {
    let (_dir, printed) = run_walkthrough("export");
    assert!(
        printed
            .contains("wrote the bag-of-words model as a SavedModel to build/export/saved_model"),
        "{printed}"
    );
    assert!(printed.contains("['__label__"), "{printed}");
}

/// docs/export.md: the exported training graph trains on two ps tasks and two workers, and the
/// imported model evaluates as the chief's graph did.
#[cfg(feature = "tf")]
#[test]
fn export_cluster_walkthrough_runs() {
    let (_dir, printed) = run_walkthrough("export-cluster");
    let chief = printed
        .lines()
        .find_map(|l| l.strip_prefix("eval: "))
        .unwrap_or_else(|| panic!("no eval line of the chief:\n{printed}"));
    let value = |text: &str, key: &str| -> f64 {
        let words: Vec<&str> = text.split_whitespace().collect();
        let at = words.iter().position(|w| *w == key).unwrap();
        words[at + 1].parse().unwrap()
    };
    let native = printed
        .lines()
        .find(|l| l.starts_with("test: 150 instances"))
        .unwrap_or_else(|| panic!("no eval of the imported model:\n{printed}"));
    for key in ["loss", "accuracy"] {
        let (tf, hw) = (value(chief, key), value(native, key));
        assert!(
            (tf - hw).abs() < 1e-4,
            "{key}: chief {tf}, imported {hw}\n{printed}"
        );
    }
}

#[test]
fn every_other_walkthrough_runs() {
    let mut names: Vec<String> = Vec::new();
    for b in readme_blocks() {
        if let Mark::Walkthrough(name) = b.mark {
            if !TESTED_APART.contains(&name.as_str()) && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    for name in names {
        run_walkthrough(&name);
    }
}

#[test]
fn marks_are_found_with_their_blocks() {
    let readme = "a\n<!-- walkthrough: x -->\n```sh\necho 1\n```\n\
                  <!-- walkthrough-file: f.toml -->\n```toml\nk = 1\n```\n";
    let blocks = marked_blocks(readme);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].mark, Mark::Walkthrough("x".into()));
    assert_eq!((blocks[0].line, blocks[0].text.as_str()), (4, "echo 1\n"));
    assert_eq!(blocks[1].mark, Mark::File("f.toml".into()));
    assert_eq!(blocks[1].text, "k = 1\n");
    assert_eq!(outputs("hogwild x -o a \\\n  --save b/c"), ["a", "b/c"]);
}
