//! `hogwild nn` and `hogwild analogy` as a user runs them: on a model trained here and on its
//! exported vectors (the same answers), on a hand-made vectors file whose answers are known by
//! construction, reading queries from standard input, evaluating a questions file, and every bad
//! input refused with the thing and the place named.

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

mod common;
use common::{command, hogwild, lr_lines, lr_setup};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `args` in `dir`; fails with stderr if the command failed; returns stdout.
fn ok(dir: &Path, args: &[&str]) -> String {
    let out = hogwild(dir, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Runs `args` in `dir`; fails if the command succeeded; returns stderr (stdout must be empty:
/// bad input is found before any answer).
fn refused(dir: &Path, args: &[&str]) -> String {
    let out = hogwild(dir, args);
    assert!(!out.status.success(), "{args:?}: {}", text(&out.stdout));
    assert_eq!(text(&out.stdout), "", "{args:?}");
    text(&out.stderr)
}

/// Runs `args` in `dir` with `input` on standard input.
fn with_stdin(dir: &Path, args: &[&str], input: &str) -> Output {
    let mut child = command(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the hogwild binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// (word, similarity) per line of an answer.
fn answer(stdout: &str) -> Vec<(String, f64)> {
    stdout
        .lines()
        .map(|l| {
            let (word, similarity) = l.split_once('\t').expect("word<TAB>similarity");
            (word.to_string(), similarity.parse().unwrap())
        })
        .collect()
}

/// Hand-made vectors on the axes (male, female, royal, young), of different lengths, with
/// "King" pointing where man : king :: woman : ? points, (1/sqrt2 - 1, 1, 1/sqrt2, 0) to 5
/// decimals.
const FAMILY: &str = "7 4\n\
    man 2 0 0 0\n\
    woman 0 0.5 0 0\n\
    king 3 0 3 0\n\
    King -0.29289 1 0.70711 0\n\
    queen 0 1 1 0\n\
    boy 1 0 0 1\n\
    girl 0 7 0 7\n";

/// Answers known by construction (the core's tests derive them): in "family", lines 2, 3, 4 and
/// 7 right (King is passed over: it is the query word KING upper-cased), line 5 wrong (queen),
/// line 6 skipped (no "princess"), line 8 not four words; "capitals" all skipped.
const QUESTIONS: &str = ": family\n\
    man king woman queen\n\
    man boy woman girl\n\
    woman queen man king\n\
    man king woman girl\n\
    man king woman princess\n\
    MAN KING Woman QUEEN\n\
    man king woman\n\
    : capitals\n\
    paris france rome italy\n\
    athens greece oslo norway\n";

fn family(dir: &Path) {
    std::fs::write(dir.join("family.txt"), FAMILY).unwrap();
    std::fs::write(dir.join("q.txt"), QUESTIONS).unwrap();
}

#[test]
fn hand_made_vectors_give_the_answers_known_by_construction() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    family(d);
    // man = (1, 0, 0, 0) after normalising: king and boy at 45 degrees (a tie, in the file's
    // order), woman at 90.
    assert_eq!(
        ok(d, &["nn", "--vectors", "family.txt", "man", "-k", "3"]),
        "king\t0.707107\nboy\t0.707107\nwoman\t0.000000\n"
    );
    // Two queries: two blocks, an empty line between them. boy = (1, 0, 0, 1) / sqrt2: man at
    // 45 degrees, then king and girl at 60 (a tie). A quoted argument of two words queries their
    // mean (gensim's most_similar(positive=["king", "queen"])), (1, 1, 2, 0) / sqrt6: King's
    // cosine with it is 0.687717 (its five decimals), man's 1/sqrt6.
    assert_eq!(
        ok(
            d,
            &[
                "nn",
                "--vectors",
                "family.txt",
                "-k",
                "2",
                "boy",
                "king queen"
            ]
        ),
        "man\t0.707107\nking\t0.500000\n\nKing\t0.687717\nman\t0.408248\n"
    );
    // man : king :: woman : ? -- King by construction (cosine 1), then queen at
    // (1 + 1/sqrt2) / sqrt2 / sqrt(3 - sqrt2) = 0.958569, girl at 1/sqrt2 / sqrt(3 - sqrt2).
    let got = answer(&ok(
        d,
        &[
            "analogy",
            "--vectors",
            "family.txt",
            "man",
            "king",
            "woman",
            "-k",
            "3",
        ],
    ));
    let words: Vec<&str> = got.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(words, ["King", "queen", "girl"]);
    let s2 = 2f64.sqrt();
    let want = [
        1.0,
        (1.0 + 1.0 / s2) / s2 / (3.0 - s2).sqrt(),
        1.0 / s2 / (3.0 - s2).sqrt(),
    ];
    for ((_, similarity), want) in got.iter().zip(want) {
        assert!((similarity - want).abs() < 2e-6, "{got:?}");
    }
}

#[test]
fn queries_are_read_from_standard_input_when_none_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    family(d);
    // A block per non-blank line; an unknown word is reported with its line, its block left
    // empty, the next line answered, and the exit status says that one failed.
    let out = with_stdin(
        d,
        &["nn", "--vectors", "family.txt", "-k", "1"],
        "man\n\n  \nprincess\ngirl\n",
    );
    assert_eq!(text(&out.stdout), "king\t0.707107\n\n\nwoman\t0.707107\n");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("standard input line 4: \"princess\" has no vector"),
        "{stderr}"
    );
    assert!(stderr.contains("1 of the 3 queries"), "{stderr}");
    assert!(!out.status.success());
    // Three words per line for analogies; another count is reported and skipped.
    let out = with_stdin(
        d,
        &["analogy", "--vectors", "family.txt", "-k", "1"],
        "man boy woman\nman king\n",
    );
    assert_eq!(text(&out.stdout), "girl\t0.958569\n\n");
    assert!(
        text(&out.stderr).contains("standard input line 2: 2 words: an analogy is three"),
        "{}",
        text(&out.stderr)
    );
    let out = with_stdin(d, &["nn", "--vectors", "family.txt", "-k", "1"], "boy\n");
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), "man\t0.707107\n");
}

#[test]
fn questions_are_scored_as_gensim_scores_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    family(d);
    let out = hogwild(
        d,
        &["analogy", "--vectors", "family.txt", "--questions", "q.txt"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "q.txt: 8 questions, answered with the first 7 of the 7 words of family.txt \
         (restrict_vocab 300000), compared upper-cased\n\
         family: 80.0% (4/5)\n\
         capitals: no question answered (2 skipped)\n\
         Quadruplets with out-of-vocabulary words: 37.5%\n\
         Total accuracy: 80.0% (4/5)\n\
         skipped: 3 of 8 questions, with a word outside the first 7 words\n"
    );
    assert_eq!(
        text(&out.stderr),
        "warning: q.txt: line 8: not four words: skipped, as gensim skips them\n"
    );
    // Case-sensitive: King answers lines 2 and 5 (wrong), line 7 is skipped. The first 5 words
    // (queen the last of them): lines 3 and 5 are skipped too, line 2 wrong, line 4 right.
    let got = ok(
        d,
        &[
            "analogy",
            "--vectors",
            "family.txt",
            "--questions",
            "q.txt",
            "--case-sensitive",
        ],
    );
    assert!(got.contains("\nfamily: 50.0% (2/4)\n"), "{got}");
    let got = ok(
        d,
        &[
            "analogy",
            "--vectors",
            "family.txt",
            "--questions",
            "q.txt",
            "--case-sensitive",
            "--restrict-vocab",
            "5",
        ],
    );
    assert!(got.contains("first 5 of the 7 words"), "{got}");
    assert!(got.contains("\nfamily: 50.0% (1/2)\n"), "{got}");
    assert!(got.contains("\nskipped: 6 of 8 questions"), "{got}");
}

/// A word2vec setup in `dir` (as word2vec_cli.rs's): two groups of words that never share a
/// line, so that each word's neighbours are its own group's.
fn word2vec_setup(dir: &Path) {
    std::fs::write(
        dir.join("data.prototxt"),
        "name: \"MultiSlotDataFeed\"\nbatch_size: 4\nmulti_slot_desc {\n  \
         slots { name: \"words\" type: \"uint64\" is_dense: false is_used: true }\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("w2v.toml"),
        "[model]\nkind = \"word2vec\"\ninput = \"text\"\nvocab_file = \"vocab.txt\"\ndim = 8\n\
         min_count = 1\nsample = 0.0\nwindow = 2\nnegative = 3\n\n[optimizer]\nkind = \"sgd\"\n\
         lr = 0.05\n",
    )
    .unwrap();
    let text = "red green blue red\ngreen blue red blue\none two three four\ntwo four one three\n"
        .repeat(30);
    std::fs::write(dir.join("text.txt"), text).unwrap();
    ok(
        dir,
        &[
            "train",
            "--config",
            "w2v.toml",
            "--feed",
            "data.prototxt",
            "text.txt",
            "--epochs",
            "3",
            "--threads",
            "1",
            "--save",
            "m.ckpt",
        ],
    );
    ok(dir, &["export", "--model", "m.ckpt", "-o", "vectors.txt"]);
}

#[test]
fn a_model_answers_as_its_exported_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    word2vec_setup(d);
    for query in [
        &["nn", "red"][..],
        &["nn", "two"],
        &["analogy", "red", "green", "one"],
    ] {
        let from_model = answer(&ok(d, &[query, &["--model", "m.ckpt"]].concat()));
        let from_file = answer(&ok(d, &[query, &["--vectors", "vectors.txt"]].concat()));
        // Every other word, in the same order; the file's six decimals move the cosines a little.
        assert_eq!(
            from_model.len(),
            7 - (query.len() - 1),
            "{query:?}: {from_model:?}"
        );
        for ((a, x), (b, y)) in from_model.iter().zip(&from_file) {
            assert_eq!(a, b, "{query:?}: {from_model:?} {from_file:?}");
            assert!(
                (x - y).abs() < 1e-4,
                "{query:?}: {from_model:?} {from_file:?}"
            );
        }
    }
    let q = "questions.txt";
    std::fs::write(
        d.join(q),
        ": colours\nred green blue red\n: numbers\none two three four\n",
    )
    .unwrap();
    let from_model = ok(d, &["analogy", "--model", "m.ckpt", "--questions", q]);
    let from_file = ok(
        d,
        &["analogy", "--vectors", "vectors.txt", "--questions", q],
    );
    let rest = |s: &str| s.split_once('\n').unwrap().1.to_string();
    assert!(
        from_model.starts_with(
            "questions.txt: 2 questions, answered with the first 7 of the 7 words of m.ckpt"
        ),
        "{from_model}"
    );
    assert_eq!(rest(&from_model), rest(&from_file));
    assert!(from_model.contains("\nTotal accuracy: "), "{from_model}");
}

#[test]
fn bad_input_is_refused_with_the_thing_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    family(d);
    fn v<'a>(args: &[&'a str]) -> Vec<&'a str> {
        [args, &["--vectors", "family.txt"]].concat()
    }
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["nn", "man"], "--model <MODEL>|--vectors <FILE>"),
        (
            vec!["nn", "--vectors", "family.txt", "--model", "m", "man"],
            "cannot be used with",
        ),
        (v(&["nn", "-k", "0", "man"]), "0 words answer nothing"),
        (
            v(&["analogy", "-k", "0", "a", "b", "c"]),
            "0 words answer nothing",
        ),
        (v(&["nn", "-k", "x", "man"]), "\"x\" is not a number"),
        (
            v(&["nn", "man", "Queen"]),
            "\"Queen\" has no vector (words are matched exactly; there is \"queen\")",
        ),
        (
            v(&["nn", "princess"]),
            "\"princess\" has no vector (it is none of the 7 words)",
        ),
        (v(&["nn", ""]), "an empty WORD argument"),
        (
            v(&["analogy", "man", "king"]),
            "analogy takes three words, A B C",
        ),
        (
            v(&["analogy", "man", "king", "prince"]),
            "\"prince\" has no vector",
        ),
        (
            v(&["analogy", "--questions", "q.txt", "man", "king", "woman"]),
            "cannot be used with",
        ),
        (
            v(&["analogy", "--questions", "q.txt", "-k", "3"]),
            "cannot be used with '-k <N>'",
        ),
        (
            v(&["analogy", "--restrict-vocab", "5", "a", "b", "c"]),
            "cannot be used with",
        ),
        (
            v(&["analogy", "--restrict-vocab", "5"]),
            "--questions <FILE>",
        ),
        (
            v(&["analogy", "--questions", "q.txt", "--restrict-vocab", "0"]),
            "0 words answer no question",
        ),
        (
            v(&["analogy", "--questions", "none.txt"]),
            "--questions none.txt: cannot read",
        ),
        (
            vec!["nn", "--vectors", "none.txt", "man"],
            "--vectors none.txt: cannot read",
        ),
        (
            vec!["nn", "--model", "none.ckpt", "man"],
            "--model none.ckpt: cannot read",
        ),
        (
            vec!["nn", "--vectors", "q.txt", "man"],
            "q.txt:1: expected the header of word2vec's text format",
        ),
        (
            vec!["nn", "--model", "family.txt", "man"],
            "checkpoint family.txt: not a hogwild checkpoint (bad magic bytes); it looks like \
             vectors in word2vec's text format: give it with --vectors",
        ),
    ];
    for (args, want) in &cases {
        let stderr = refused(d, args);
        assert!(stderr.contains(want), "{args:?}: {stderr:?} lacks {want:?}");
    }

    // Malformed files name the file and the line, and a vectors file is checked before the
    // questions are answered, the questions file before the vectors are read.
    std::fs::write(d.join("short.txt"), "3 4\nman 1 0 0 0\nwoman 0 1 0\n").unwrap();
    let e = refused(d, &["nn", "--vectors", "short.txt", "man"]);
    assert!(
        e.contains("short.txt:3: \"woman\" has 3 values, the header says 4"),
        "{e}"
    );
    std::fs::write(d.join("nan.txt"), "1 2\nman 1 NaN\n").unwrap();
    let e = refused(d, &["nn", "--vectors", "nan.txt", "man"]);
    assert!(
        e.contains("nan.txt:2: value 2 of \"man\", \"NaN\", is not a finite number"),
        "{e}"
    );
    std::fs::write(d.join("truncated.txt"), "3 4\nman 1 0 0 0\n").unwrap();
    let e = refused(d, &["nn", "--vectors", "truncated.txt", "man"]);
    assert!(
        e.contains("truncated.txt:3: the file ends after 1 of the 3 vectors"),
        "{e}"
    );
    std::fs::write(d.join("headless.txt"), "man king woman queen\n: s\n").unwrap();
    let e = refused(
        d,
        &[
            "analogy",
            "--vectors",
            "short.txt",
            "--questions",
            "headless.txt",
        ],
    );
    assert!(
        e.contains("headless.txt:1: a question before the first section header"),
        "{e}"
    );
    std::fs::write(d.join("empty.txt"), ": s\n\n").unwrap();
    let e = refused(
        d,
        &[
            "analogy",
            "--vectors",
            "family.txt",
            "--questions",
            "empty.txt",
        ],
    );
    assert!(e.contains("empty.txt: no questions"), "{e}");

    // Vectors that add up to zero have no direction to rank by.
    std::fs::write(d.join("zero.txt"), "2 2\nnil 0 0\nx 1 0\n").unwrap();
    let e = refused(d, &["nn", "--vectors", "zero.txt", "nil"]);
    assert!(
        e.contains("\"nil\": the query's vectors add up to zero"),
        "{e}"
    );

    // A model of another kind is named.
    lr_setup(d, &lr_lines(50));
    ok(
        d,
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
        ],
    );
    let e = refused(d, &["nn", "--model", "lr.ckpt", "man"]);
    assert!(
        e.contains(
            "lr.ckpt: a logistic-regression (lr) model: only word2vec models have word vectors"
        ),
        "{e}"
    );
}
