//! word2vec checkpoints as a user moves and reuses them: a saved model holds its vocabulary, so
//! `export`, `eval` and `predict` give its own words from any directory, whatever later runs
//! write into the vocabulary file; checkpoints of older versions read the file they name.

use std::path::Path;
use std::process::Output;

mod common;
use common::hogwild;

/// Text whose words are `words`, each line a different order of them, most frequent first: the
/// vocabulary built from it is `words` in that order.
fn text(words: [&str; 4]) -> String {
    let [a, b, c, d] = words;
    format!("{a} {b} {c} {d} {a}\n{b} {a} {c}\n{a} {b} {d} {c}\n{a} {b}\n").repeat(10)
}

/// A word2vec setup in `dir`: desc, config (`vocab_file = "vocab.txt"`, relative) and text
/// files `x.txt` and `y.txt` with vocabularies of the same size and no word in common.
fn setup(dir: &Path) {
    std::fs::write(
        dir.join("data.prototxt"),
        "name: \"MultiSlotDataFeed\"\nbatch_size: 4\nmulti_slot_desc {\n  \
         slots { name: \"words\" type: \"uint64\" is_dense: false is_used: true }\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("w2v.toml"),
        "[model]\nkind = \"word2vec\"\ninput = \"text\"\nvocab_file = \"vocab.txt\"\ndim = 4\n\
         min_count = 1\nsample = 0.0\n\n[optimizer]\nkind = \"sgd\"\nlr = 0.025\n",
    )
    .unwrap();
    std::fs::write(dir.join("x.txt"), text(["red", "green", "blue", "zebra"])).unwrap();
    std::fs::write(dir.join("y.txt"), text(["one", "two", "three", "four"])).unwrap();
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Trains a model on `text` in `dir` and saves it as `ckpt`.
fn train(dir: &Path, text: &str, ckpt: &str) {
    ok(&hogwild(
        dir,
        &[
            "train",
            "--config",
            "w2v.toml",
            "--feed",
            "data.prototxt",
            text,
            "--epochs",
            "2",
            "--threads",
            "1",
            "--save",
            ckpt,
        ],
    ));
}

/// `hogwild export` of `model`, run in `dir`: the vectors file's text.
fn export(dir: &Path, model: &Path) -> String {
    let out = dir.join("vectors.txt");
    let args = ["export", "--model", &model.display().to_string(), "-o"];
    ok(&hogwild(
        dir,
        &[&args[..], &[&out.display().to_string()]].concat(),
    ));
    std::fs::read_to_string(out).unwrap()
}

/// The words of a vectors file, in its order.
fn words(vectors: &str) -> Vec<&str> {
    vectors
        .lines()
        .skip(1)
        .map(|l| l.split(' ').next().unwrap())
        .collect()
}

/// `hogwild eval --threads 1` of `model` on `files`, run in `dir`: its result line.
fn eval(dir: &Path, model: &Path, files: &[&Path]) -> String {
    let feed = files[0].parent().unwrap().join("data.prototxt");
    let mut args = vec![
        "eval".to_string(),
        "--model".into(),
        model.display().to_string(),
        "--feed".into(),
        feed.display().to_string(),
        "--threads".into(),
        "1".into(),
    ];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stdout = ok(&hogwild(dir, &args));
    stdout.lines().last().unwrap_or_default().to_string()
}

/// (a) A model trained in one directory (its vocabulary file named by a relative path) exports,
/// evaluates and predicts from another directory, with its own words, writing nothing there but
/// its outputs.
#[test]
fn a_saved_model_is_used_from_another_directory() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    setup(a.path());
    train(a.path(), "x.txt", "m.ckpt");
    let model = a.path().join("m.ckpt");
    let here = export(a.path(), &model);
    assert_eq!(words(&here), ["red", "green", "blue", "zebra"]);
    assert!(here.starts_with("4 4\n"), "{here}");
    assert_eq!(export(b.path(), &model), here);

    let x = a.path().join("x.txt");
    let in_a = eval(a.path(), &model, &[&x]);
    assert!(in_a.starts_with("test: 40 instances"), "{in_a}");
    assert_eq!(eval(b.path(), &model, &[&x]), in_a);
    let feed = a.path().join("data.prototxt");
    let out = hogwild(
        b.path(),
        &[
            "predict",
            "--model",
            &model.display().to_string(),
            "--feed",
            &feed.display().to_string(),
            &x.display().to_string(),
            "-o",
            "p.txt",
        ],
    );
    ok(&out);
    let predictions = std::fs::read_to_string(b.path().join("p.txt")).unwrap();
    assert_eq!(predictions.lines().count(), 40);
    let mut left: Vec<String> = std::fs::read_dir(b.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["p.txt", "vectors.txt"], "nothing else written in b");
}

/// (b) A second model trained in the same directory on other text with as many words rewrites
/// the vocabulary file; the first model still exports its own words with its own vectors, and
/// evaluates as before.
#[test]
fn a_later_run_does_not_change_an_earlier_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    train(d, "x.txt", "one.ckpt");
    let one = d.join("one.ckpt");
    let before = export(d, &one);
    let x = d.join("x.txt");
    let eval_before = eval(d, &one, &[&x]);
    train(d, "y.txt", "two.ckpt");
    let vocab = std::fs::read_to_string(d.join("vocab.txt")).unwrap();
    assert!(vocab.starts_with("one "), "the file was rewritten: {vocab}");
    assert_eq!(
        words(&export(d, &d.join("two.ckpt"))),
        ["one", "two", "three", "four"]
    );
    let after = export(d, &one);
    assert_eq!(words(&after), ["red", "green", "blue", "zebra"]);
    assert_eq!(after, before, "the same words with the same vectors");
    assert_eq!(eval(d, &one, &[&x]), eval_before);
}

/// (c) The vocabulary is covered by the checkpoint's checksum: a changed byte in a word is
/// refused, and nothing is exported.
#[test]
fn a_corrupt_stored_vocabulary_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    train(d, "x.txt", "m.ckpt");
    let path = d.join("m.ckpt");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes
        .windows(5)
        .position(|w| w == b"zebra")
        .expect("the checkpoint holds its words");
    bytes[at] = b'Z';
    std::fs::write(&path, &bytes).unwrap();
    let out = hogwild(d, &["export", "--model", "m.ckpt", "-o", "v.txt"]);
    let err = failed(&out);
    assert!(
        err.contains("m.ckpt") && err.contains("corrupt: checksum"),
        "{err}"
    );
    assert!(!d.join("v.txt").exists());
}

/// The fixture: a checkpoint written by `hogwild train` before checkpoints held vocabularies
/// (format version 2, at commit 7e86bb9), in a directory holding `data.prototxt`, this model
/// config as `w2v.toml` and `text.txt` = "red green blue red\ngreen red\n":
///   [model] kind = "word2vec", input = "text", vocab_file = "vocab.txt", dim = 2,
///           min_count = 1, sample = 0.0; [optimizer] kind = "sgd", lr = 0.025
///   hogwild train --config w2v.toml --feed data.prototxt text.txt --epochs 1 --threads 1 \
///       --save old.ckpt
/// which wrote `vocab.txt` = OLD_VOCAB; `hogwild export --model old.ckpt -o v.txt` then wrote
/// OLD_VECTORS.
const OLD_CHECKPOINT: &[u8] = include_bytes!("fixtures/word2vec-v2.ckpt");
const OLD_VOCAB: &str = "red 3\ngreen 2\nblue 1\n";
const OLD_VECTORS: &str = "3 2\nred -0.008664 0.186217\ngreen -0.214493 0.227910\n\
                           blue -0.084629 -0.137284\n";

/// (d) An older checkpoint loads with the vocabulary file it names, and says that saving it again
/// stores the vocabulary; without the file, or with another vocabulary's, it is refused with the
/// file named. Saved again, it no longer needs the file.
#[test]
fn an_older_checkpoint_reads_the_vocabulary_file_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    std::fs::write(d.join("old.ckpt"), OLD_CHECKPOINT).unwrap();
    std::fs::write(d.join("vocab.txt"), OLD_VOCAB).unwrap();
    let out = hogwild(d, &["export", "--model", "old.ckpt", "-o", "v.txt"]);
    ok(&out);
    assert_eq!(
        std::fs::read_to_string(d.join("v.txt")).unwrap(),
        OLD_VECTORS
    );
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(
        note.contains("old.ckpt")
            && note.contains("vocab.txt")
            && note.contains("saving the model again"),
        "{note}"
    );

    // From another directory the relative path leads nowhere.
    let elsewhere = tempfile::tempdir().unwrap();
    let old = d.join("old.ckpt");
    let args = [
        "export",
        "--model",
        &old.display().to_string(),
        "-o",
        "v.txt",
    ];
    let err = failed(&hogwild(elsewhere.path(), &args));
    assert!(
        err.contains("old.ckpt")
            && err.contains("older hogwild")
            && err.contains("vocab.txt (relative to the current directory)")
            && err.contains("No such file"),
        "{err}"
    );
    assert!(!elsewhere.path().join("v.txt").exists());

    // A vocabulary of another size is not this model's.
    std::fs::write(d.join("vocab.txt"), "a 4\nb 3\nc 2\nd 1\n").unwrap();
    let err = failed(&hogwild(
        d,
        &["export", "--model", "old.ckpt", "-o", "w.txt"],
    ));
    assert!(
        err.contains("vocab.txt") && err.contains("4 words for the model's 3 vectors"),
        "{err}"
    );

    // Trained further and saved, the model holds its vocabulary.
    std::fs::write(d.join("vocab.txt"), OLD_VOCAB).unwrap();
    std::fs::write(d.join("text.txt"), "red green blue red\ngreen red\n").unwrap();
    ok(&hogwild(
        d,
        &[
            "train",
            "--resume",
            "old.ckpt",
            "--feed",
            "data.prototxt",
            "text.txt",
            "--threads",
            "1",
            "--save",
            "new.ckpt",
        ],
    ));
    std::fs::remove_file(d.join("vocab.txt")).unwrap();
    let new = d.join("new.ckpt").display().to_string();
    let out = hogwild(
        elsewhere.path(),
        &["export", "--model", &new, "-o", "v.txt"],
    );
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    let vectors = std::fs::read_to_string(elsewhere.path().join("v.txt")).unwrap();
    assert_eq!(words(&vectors), ["red", "green", "blue"]);
}

/// The repository root (this crate is `crates/hogwild-cli`).
fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The words of `nn`'s answer: the first word of each `word<TAB>similarity` line.
fn neighbours(answer: &str) -> Vec<&str> {
    answer
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(w, _)| w))
        .collect()
}

/// CBOW (`examples/word2vec/cbow.toml`: word2vec.c's CBOW rate 0.05; 30 epochs) trained on
/// the walk-through's text: the model stores its architecture, and `nn` finds each topic's words
/// near a word of the topic (the text mixes 15 words of each of three topics with 21 common ones:
/// examples/text/generate.py); `analogy --questions` scores the example questions.
#[test]
fn cbow_learns_the_example_topics_and_answers_queries() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let examples = repo().join("examples");
    example_text(d);
    let config = std::fs::read_to_string(examples.join("word2vec/cbow.toml")).unwrap();
    assert!(config.contains("\narch = \"cbow\""), "{config}");
    std::fs::write(d.join("cbow.toml"), config).unwrap();
    let feed = examples
        .join("word2vec/data.prototxt")
        .display()
        .to_string();
    let args = [
        "train",
        "--config",
        "cbow.toml",
        "--feed",
        &feed,
        "text.txt",
    ];
    let more = ["--epochs", "30", "--threads", "1", "--save", "cbow.ckpt"];
    ok(&hogwild(d, &[&args[..], &more[..]].concat()));
    let stored = String::from_utf8_lossy(&std::fs::read(d.join("cbow.ckpt")).unwrap()).into_owned();
    assert!(
        stored.contains("\narch = \"cbow\"\n"),
        "the checkpoint's config"
    );

    let answers = ok(&hogwild(
        d,
        &[
            "nn",
            "--model",
            "cbow.ckpt",
            "oven",
            "rain",
            "coach",
            "-k",
            "5",
        ],
    ));
    let topics = [
        "recipe oven flour butter garlic simmer bake pan sauce onion salt pepper dough roast \
         kitchen",
        "rain cloud storm wind forecast sunny cold snow temperature humid fog thunder breeze \
         frost umbrella",
        "match team goal player coach score league season win referee ball stadium fans \
         striker keeper",
    ];
    let answers: Vec<&str> = answers.split("\n\n").collect();
    assert_eq!(answers.len(), 3, "{answers:?}");
    // Five words drawn from the 67 of the vocabulary would hold about one of a topic's 15.
    let mut total = 0;
    for (answer, topic) in answers.iter().zip(topics) {
        let words = neighbours(answer);
        assert_eq!(words.len(), 5, "{answer}");
        let of_topic = words
            .iter()
            .filter(|w| topic.split(' ').any(|t| t == **w))
            .count();
        assert!(of_topic >= 2, "{of_topic} of 5 of the topic: {answer}");
        total += of_topic;
    }
    assert!(total >= 10, "{total} of 15 of their topics: {answers:?}");
    let questions = examples
        .join("word2vec/questions.txt")
        .display()
        .to_string();
    let scored = ok(&hogwild(
        d,
        &["analogy", "--model", "cbow.ckpt", "--questions", &questions],
    ));
    for line in [
        "\nQuadruplets with out-of-vocabulary words: 16.7%\n",
        "\nTotal accuracy: ",
    ] {
        assert!(scored.contains(line), "{line:?}: {scored}");
    }
}

/// The walk-through's text (examples/text/train.txt without its labels) in `dir` as `text.txt`.
fn example_text(dir: &Path) {
    let text: String = std::fs::read_to_string(repo().join("examples/text/train.txt"))
        .unwrap()
        .lines()
        .map(|l| format!("{}\n", l.split_once(' ').map_or("", |(_, words)| words)))
        .collect();
    std::fs::write(dir.join("text.txt"), text).unwrap();
}

/// `examples/word2vec/model.toml` with `lines` added to its model table, as `name` in `dir`.
fn example_config(dir: &Path, name: &str, lines: &str) {
    let config = std::fs::read_to_string(repo().join("examples/word2vec/model.toml")).unwrap();
    let config = config.replacen("[model]\n", &format!("[model]\n{lines}"), 1);
    std::fs::write(dir.join(name), config).unwrap();
}

/// The vectors of `word v1 ... v_dim` lines (a vectors file's header skipped), by word.
fn parse_vectors(text: &str) -> Vec<(String, Vec<f32>)> {
    text.lines()
        .filter(|l| l.split(' ').count() > 2)
        .map(|l| {
            let mut parts = l.split(' ');
            let word = parts.next().unwrap().to_string();
            (word, parts.map(|x| x.parse().unwrap()).collect())
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

/// Skip-gram with subwords (`examples/word2vec/subwords.toml`: minn 3, maxn 6, fastText's; 100
/// epochs) on the walk-through's text: a misspelled
/// word, which the text never holds, gets a vector from its character n-grams whose nearest
/// exported word is the word it misspells; a word of the vocabulary gets the line `export`
/// writes; words come as arguments or from standard input.
#[test]
fn subwords_give_misspelled_words_vectors_near_the_right_word() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    example_text(d);
    let config = std::fs::read_to_string(repo().join("examples/word2vec/subwords.toml")).unwrap();
    std::fs::write(d.join("sub.toml"), config).unwrap();
    let feed = repo().join("examples/word2vec/data.prototxt");
    let feed = feed.display().to_string();
    let args = ["train", "--config", "sub.toml", "--feed", &feed, "text.txt"];
    let more = ["--epochs", "100", "--threads", "1", "--save", "sub.ckpt"];
    ok(&hogwild(d, &[&args[..], &more[..]].concat()));
    let stored = String::from_utf8_lossy(&std::fs::read(d.join("sub.ckpt")).unwrap()).into_owned();
    assert!(
        stored.contains("\nminn = 3\nmaxn = 6\nsubword_buckets = 100000\n"),
        "the checkpoint's config"
    );
    let exported = parse_vectors(&export(d, &d.join("sub.ckpt")));
    let misspelled = [
        ("temprature", "temperature"),
        ("umbrela", "umbrella"),
        ("kitchn", "kitchen"),
        ("thundr", "thunder"),
    ];
    let asked: Vec<&str> = misspelled.iter().map(|(m, _)| *m).collect();
    let printed = ok(&hogwild(
        d,
        &[&["word-vectors", "--model", "sub.ckpt"][..], &asked].concat(),
    ));
    let got = parse_vectors(&printed);
    assert_eq!(got.len(), misspelled.len(), "{printed}");
    for ((word, vector), (misspelling, right)) in got.iter().zip(misspelled) {
        assert_eq!(word, misspelling);
        assert!(exported.iter().all(|(w, _)| w != word), "{word} is unseen");
        assert_eq!(vector.len(), 50);
        let nearest = exported
            .iter()
            .max_by(|a, b| cosine(&a.1, vector).total_cmp(&cosine(&b.1, vector)))
            .unwrap();
        assert_eq!(nearest.0, right, "nearest to {word}");
        // `nn` takes the misspelling too, with the same vector: its nearest word, at that
        // cosine (the exported vectors are rounded to six decimals).
        let answer = ok(&hogwild(d, &["nn", "--model", "sub.ckpt", "-k", "1", word]));
        let (first, similarity) = answer.trim_end().split_once('\t').unwrap();
        assert_eq!(first, right, "nn {word}");
        let similarity: f32 = similarity.parse().unwrap();
        let expected = cosine(&nearest.1, vector);
        assert!(
            (similarity - expected).abs() < 1e-4,
            "{similarity} {expected}"
        );
    }
    // An analogy may have a word outside the vocabulary; a word of it is left out of the
    // answer, the misspelling has no place to be left out of.
    let answer = ok(&hogwild(
        d,
        &[
            "analogy",
            "--model",
            "sub.ckpt",
            "-k",
            "3",
            "oven",
            "temprature",
            "kitchen",
        ],
    ));
    let answered: Vec<&str> = answer
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(answered.len(), 3, "{answer}");
    assert!(
        !answered.contains(&"oven") && !answered.contains(&"kitchen"),
        "{answer}"
    );
    // Standard input, several words per line; a known word's line is export's.
    let mut child = common::command(d, &["word-vectors", "--model", "sub.ckpt"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"oven temprature\n\n  umbrela\n").unwrap();
    drop(stdin);
    let from_stdin = ok(&child.wait_with_output().unwrap());
    let lines: Vec<&str> = from_stdin.lines().collect();
    assert_eq!(lines.len(), 3, "{from_stdin}");
    let vectors = std::fs::read_to_string(d.join("vectors.txt")).unwrap();
    let oven = vectors.lines().find(|l| l.starts_with("oven ")).unwrap();
    assert_eq!(lines[0], oven);
    assert_eq!(lines[1], printed.lines().next().unwrap());
    assert!(lines[2].starts_with("umbrela "), "{from_stdin}");
}

/// Subword settings that do not fit together are refused before anything is written, naming
/// the key; `word-vectors` refuses a model without subwords and words with white space.
#[test]
fn bad_subword_settings_and_models_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    example_text(d);
    let feed = repo().join("examples/word2vec/data.prototxt");
    let feed = feed.display().to_string();
    for (lines, says) in [
        (
            "minn = 3\nmaxn = 6\n",
            "bad.toml: subword_buckets: must be at least 1",
        ),
        (
            "subword_buckets = 10\n",
            "bad.toml: subword_buckets: 10 n-gram rows need minn and maxn",
        ),
        (
            "minn = 4\nmaxn = 3\nsubword_buckets = 10\n",
            "bad.toml: maxn: must be at least minn (4), got 3",
        ),
        (
            "minn = 3\nmaxn = 6\nsubword_buckets = 5000000000\n",
            "bad.toml: subword_buckets: 5000000000 is more than the 2147483648 allowed",
        ),
    ] {
        example_config(d, "bad.toml", lines);
        let args = ["train", "--config", "bad.toml", "--feed", &feed, "text.txt"];
        let e = failed(&hogwild(d, &[&args[..], &["--save", "m.ckpt"]].concat()));
        assert!(e.contains(says), "{lines}: {e}");
        // Refused before the vocabulary pass: nothing written.
        assert!(
            !d.join("build").exists() && !d.join("m.ckpt").exists(),
            "{lines}"
        );
    }
    example_config(d, "plain.toml", "");
    let args = [
        "train",
        "--config",
        "plain.toml",
        "--feed",
        &feed,
        "text.txt",
    ];
    ok(&hogwild(
        d,
        &[&args[..], &["--save", "plain.ckpt"]].concat(),
    ));
    let e = failed(&hogwild(
        d,
        &["word-vectors", "--model", "plain.ckpt", "oven"],
    ));
    assert!(
        e.contains("plain.ckpt: the model has no subwords") && e.contains("hogwild export"),
        "{e}"
    );
    let e = failed(&hogwild(
        d,
        &["word-vectors", "--model", "plain.ckpt", "a b"],
    ));
    assert!(e.contains("WORD \"a b\""), "{e}");
    let e = failed(&hogwild(
        d,
        &["word-vectors", "--model", "none.ckpt", "oven"],
    ));
    assert!(e.contains("--model none.ckpt: cannot read"), "{e}");
}
