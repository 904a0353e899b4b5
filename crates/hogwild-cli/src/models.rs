//! Building, loading and saving the CLI's models, and expanding file arguments.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hogwild::feed::DataFeedDesc;
use hogwild::models::{
    text_to_ids, Input, ModelConfig, ModelKind, Vocab, VocabSource, Word2VecConfig,
};

use crate::paths;

// The one model type of every command, and `with_model!`, are the library's.
pub use hogwild::models::AnyModel;

/// [`AnyModel::load`], with a note on standard error when the model is a word2vec model saved
/// without its vocabulary.
pub fn load(path: &Path) -> Result<(ModelConfig, AnyModel)> {
    load_trained(path).map(|(config, model, _)| (config, model))
}

/// [`AnyModel::load_trained`], with [`load`]'s note.
pub fn load_trained(path: &Path) -> Result<(ModelConfig, AnyModel, usize)> {
    let (config, model, epochs) = AnyModel::load_trained(path)?;
    if let AnyModel::Word2vecSgd(m) = &model {
        if let VocabSource::File { checkpoint, file } = m.vocab_source() {
            eprintln!(
                "note: {} was saved by an older hogwild without its vocabulary: the words \
                 are read from {}, and are right only if that file is still the one the \
                 model was trained with; saving the model again (train --resume ... --save) \
                 stores them in the checkpoint",
                checkpoint.display(),
                file.display()
            );
        }
    }
    Ok((config, model, epochs))
}

/// What files are prepared for ([`prepare_inputs`]).
pub enum Purpose<'a> {
    /// Training a new model.
    New,
    /// Training a loaded model further.
    Resume(&'a AnyModel),
    /// Evaluating or applying a loaded model.
    Eval(&'a AnyModel),
}

/// Files ready to be read by a model.
pub struct Prepared {
    /// The MultiSlot files.
    pub files: Vec<PathBuf>,
    /// A new word2vec model's vocabulary (for [`AnyModel::new`]).
    pub vocab: Option<Vocab>,
    /// Where text converted for evaluation is kept while it is read (removed when dropped).
    _converted: Option<tempfile::TempDir>,
}

/// The MultiSlot files a model trains or evaluates on. For word2vec: with `input = "text"`, a
/// new model first builds its vocabulary from the text (a pass counting words, `min_count`
/// applied) and writes it to its vocabulary file, then every text file is converted to ids in
/// `<vocab_file>.ids/`; a loaded model converts with its own vocabulary (the one in its
/// checkpoint), into the same place to train and into a temporary directory to evaluate. With
/// `input = "ids"`, a new model reads its vocabulary file, or counts the ids of the files into it
/// when it does not exist yet. Other models read the files as given.
pub fn prepare_inputs(
    config: &ModelConfig,
    desc: &DataFeedDesc,
    files: Vec<PathBuf>,
    purpose: Purpose<'_>,
) -> Result<Prepared> {
    let mut prepared = Prepared {
        files,
        vocab: None,
        _converted: None,
    };
    let ModelKind::Word2vec(cfg) = &config.model else {
        return Ok(prepared);
    };
    let loaded = match purpose {
        Purpose::New => None,
        Purpose::Resume(m) | Purpose::Eval(m) => Some(
            m.vocab()
                .context("a word2vec configuration with a model of another kind")?,
        ),
    };
    let new_vocab = match (cfg.input, loaded) {
        (_, Some(_)) => None,
        (Input::Ids, None) if cfg.vocab_file.exists() => Some(Vocab::from_file(&cfg.vocab_file)?),
        (Input::Ids, None) => {
            paths::refuse_read_once(&prepared.files, "word2vec counts its ids before training")?;
            let vocab = Vocab::count_ids(desc, &prepared.files, &cfg.words_slot)?;
            vocab.write(&cfg.vocab_file)?;
            println!(
                "vocabulary: {} ids counted, written to {}",
                vocab.len(),
                cfg.vocab_file.display()
            );
            Some(vocab)
        }
        (Input::Text, None) => {
            paths::refuse_read_once(&prepared.files, "word2vec counts its words before training")?;
            let vocab = Vocab::count_text(&prepared.files, cfg.min_count)?;
            vocab.write(&cfg.vocab_file)?;
            println!(
                "vocabulary: {} words seen at least {} times, written to {}",
                vocab.len(),
                cfg.min_count,
                cfg.vocab_file.display()
            );
            Some(vocab)
        }
    };
    // Text is converted with the vocabulary of the model that reads it: a loaded model's own, or
    // the one just built for a new model.
    if let (Input::Text, Some(vocab)) = (cfg.input, loaded.or(new_vocab.as_ref())) {
        let out_dir = if let Purpose::Eval(_) = purpose {
            let tmp = tempfile::Builder::new()
                .prefix("hogwild-ids.")
                .tempdir()
                .context("creating a temporary directory for the text converted to ids")?;
            let dir = tmp.path().to_path_buf();
            prepared._converted = Some(tmp);
            dir
        } else {
            ids_dir(cfg)
        };
        prepared.files = text_to_ids(vocab, &prepared.files, &out_dir, cfg.max_sentence)?;
    }
    prepared.vocab = new_vocab;
    Ok(prepared)
}

/// Where text converted to ids is written.
fn ids_dir(cfg: &Word2VecConfig) -> PathBuf {
    let mut dir = cfg.vocab_file.clone().into_os_string();
    dir.push(".ids");
    PathBuf::from(dir)
}

/// Expands file arguments: plain paths, `-` (standard input, at most once), `@list` files (one
/// path per line, relative to the list), and `*` / `?` patterns in the last path component. The
/// result is sorted per argument.
pub fn expand_files(args: &[String]) -> Result<Vec<PathBuf>> {
    paths::stdin_once(args.iter().map(String::as_str))?;
    let mut out = Vec::new();
    for arg in args {
        if let Some(list) = arg.strip_prefix('@') {
            let text = std::fs::read_to_string(list)
                .with_context(|| format!("cannot read the file list {list}"))?;
            let base = Path::new(list).parent().unwrap_or(Path::new(""));
            for line in text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
            {
                out.push(base.join(line));
            }
        } else if arg.contains(['*', '?']) {
            let path = Path::new(arg);
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let pattern = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if dir.to_str().is_some_and(|d| d.contains(['*', '?'])) {
                bail!("{arg}: patterns are only supported in the file name, not in directories");
            }
            let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
                .with_context(|| format!("{arg}: cannot list {}", dir.display()))?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_str().is_some_and(|n| matches(pattern, n)))
                .map(|e| e.path())
                .collect();
            if found.is_empty() {
                bail!("{arg}: no file matches");
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(paths::input(Path::new(arg)));
        }
    }
    if out.is_empty() {
        bail!("no data files given");
    }
    Ok(out)
}

/// Whether `name` matches `pattern` (`*` any run, `?` one character).
fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The number of threads to use when none is given: every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_a_shell() {
        assert!(matches("part-*", "part-00"));
        assert!(matches("*.txt", "a.txt"));
        assert!(matches("p?rt", "part"));
        assert!(!matches("part-*", "xpart-0"));
        assert!(!matches("*.txt", "a.txt.gz"));
    }

    #[test]
    fn globs_and_lists_expand_and_mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["part-1", "part-0", "other"] {
            std::fs::write(dir.path().join(n), "").unwrap();
        }
        let d = dir.path().display();
        let got = expand_files(&[format!("{d}/part-*")]).unwrap();
        assert_eq!(
            got,
            vec![dir.path().join("part-0"), dir.path().join("part-1")]
        );
        let list = dir.path().join("files.txt");
        std::fs::write(&list, "other\n# comment\npart-0\n").unwrap();
        let got = expand_files(&[format!("@{}", list.display())]).unwrap();
        assert_eq!(
            got,
            vec![dir.path().join("other"), dir.path().join("part-0")]
        );
        let e = expand_files(&[format!("{d}/none-*")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no file matches"), "{e}");
        assert!(expand_files(&[]).is_err());
    }

    #[test]
    fn word2vec_text_input_builds_vocabulary_and_ids_and_needs_sgd() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("a.txt");
        std::fs::write(&text, "the cat the dog\nthe cat\nrare\n").unwrap();
        let vocab = dir.path().join("w2v/vocab.txt");
        let toml = format!(
            "[model]\nkind = \"word2vec\"\ninput = \"text\"\nvocab_file = \"{}\"\n\
             min_count = 2\ndim = 4\n\n[optimizer]\nkind = \"sgd\"\nlr = 0.025\n",
            vocab.display()
        );
        let config = ModelConfig::from_toml(&toml, "w2v.toml").unwrap();
        let desc = DataFeedDesc::from_text(
            "multi_slot_desc { slots { name: \"words\" type: \"uint64\" is_used: true } }",
        )
        .unwrap();
        let prepared = prepare_inputs(&config, &desc, vec![text.clone()], Purpose::New).unwrap();
        let files = prepared.files.clone();
        assert_eq!(std::fs::read_to_string(&vocab).unwrap(), "the 3\ncat 2\n");
        assert_eq!(prepared.vocab.as_ref().unwrap().words, ["the", "cat"]);
        assert_eq!(
            files,
            vec![dir.path().join("w2v/vocab.txt.ids/0-a.txt.ids")]
        );
        assert_eq!(
            std::fs::read_to_string(&files[0]).unwrap(),
            "3 0 1 0\n2 0 1\n"
        );
        let model = AnyModel::new(&config, prepared.vocab.clone()).unwrap();
        assert!(matches!(model, AnyModel::Word2vecSgd(_)));
        // A loaded model converts text to evaluate with its own vocabulary, whatever the
        // vocabulary file holds now, into a temporary directory removed once read.
        std::fs::write(&vocab, "cat 9\nthe 9\n").unwrap();
        let eval =
            prepare_inputs(&config, &desc, vec![text.clone()], Purpose::Eval(&model)).unwrap();
        let converted = eval.files[0].clone();
        assert!(
            !converted.starts_with(dir.path()),
            "{}",
            converted.display()
        );
        assert_eq!(
            std::fs::read_to_string(&converted).unwrap(),
            "3 0 1 0\n2 0 1\n"
        );
        drop(eval);
        assert!(!converted.exists());
        // Refused as the file is read, before a vocabulary pass.
        let e = ModelConfig::from_toml(
            &toml.replace("kind = \"sgd\"", "kind = \"adam_async\""),
            "w2v.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("word2vec") && e.contains("sgd"), "{e}");
    }
}
