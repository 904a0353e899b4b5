//! Building, loading and saving the CLI's models, and expanding file arguments.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hogwild::checkpoint;
use hogwild::feed::DataFeedDesc;
use hogwild::model::Model;
use hogwild::models::{
    text_to_ids, Bow, Ctr, CtrKind, Input, ModelConfig, ModelKind, OptimizerConfig, Vocab,
    Word2Vec, Word2VecConfig,
};
use hogwild::optim::{Adagrad, AdamAsync, Sgd};
use hogwild::Table;

/// A model of any built-in kind with any optimizer (each combination is its own compiled type).
#[allow(clippy::enum_variant_names)] // model and optimizer, both part of each name
#[allow(clippy::large_enum_variant)] // one model per process: the enum's size does not matter
pub enum AnyModel {
    BowSgd(Bow<Sgd<f32>>),
    BowAdagrad(Bow<Adagrad<f32>>),
    BowAdam(Bow<AdamAsync<f32>>),
    /// word2vec trains with plain SGD and a decaying learning rate.
    Word2vecSgd(Word2Vec),
    /// Logistic regression or a factorization machine.
    CtrSgd(Ctr<Sgd<f32>>),
    CtrAdagrad(Ctr<Adagrad<f32>>),
    CtrAdam(Ctr<AdamAsync<f32>>),
}

/// Runs `$body` with `$m` bound to the concrete model.
#[macro_export]
macro_rules! with_model {
    ($any:expr, $m:ident => $body:expr) => {
        match $any {
            $crate::models::AnyModel::BowSgd($m) => $body,
            $crate::models::AnyModel::BowAdagrad($m) => $body,
            $crate::models::AnyModel::BowAdam($m) => $body,
            $crate::models::AnyModel::Word2vecSgd($m) => $body,
            $crate::models::AnyModel::CtrSgd($m) => $body,
            $crate::models::AnyModel::CtrAdagrad($m) => $body,
            $crate::models::AnyModel::CtrAdam($m) => $body,
        }
    };
}

/// The checkpoint table holding the epochs a model was trained for.
const EPOCHS_TABLE: &str = "trained_epochs";

/// Where a checkpoint's tables come from: none (a fresh model) or a loaded checkpoint.
type Source<'a> = Option<&'a mut checkpoint::Checkpoint>;

fn word2vec_sgd(opt: &OptimizerConfig) -> Result<Sgd<f32>> {
    opt.sgd().context(
        "word2vec trains with plain SGD and a linearly decaying learning rate: \
         set [optimizer] kind = \"sgd\"",
    )
}

impl AnyModel {
    /// A fresh model (parameters not yet initialised: run the startup step). A word2vec model
    /// reads its vocabulary file (see [`prepare_inputs`]).
    pub fn new(config: &ModelConfig) -> Result<Self> {
        Self::build(config, None)
    }

    fn build(config: &ModelConfig, mut ck: Source<'_>) -> Result<Self> {
        let opt = config.optimizer;
        Ok(match &config.model {
            ModelKind::Bow(bow) => {
                let bow = bow.clone();
                match opt {
                    OptimizerConfig::Sgd { .. } => {
                        let o = opt.sgd().context("sgd settings")?;
                        Self::BowSgd(match ck {
                            Some(ck) => Bow::from_checkpoint(bow, o, ck)?,
                            None => Bow::new(bow, o)?,
                        })
                    }
                    OptimizerConfig::Adagrad { .. } => {
                        let o = opt.adagrad().context("adagrad settings")?;
                        Self::BowAdagrad(match ck {
                            Some(ck) => Bow::from_checkpoint(bow, o, ck)?,
                            None => Bow::new(bow, o)?,
                        })
                    }
                    OptimizerConfig::AdamAsync { .. } => {
                        let o = opt.adam_async().context("adam_async settings")?;
                        Self::BowAdam(match ck {
                            Some(ck) => Bow::from_checkpoint(bow, o, ck)?,
                            None => Bow::new(bow, o)?,
                        })
                    }
                }
            }
            ModelKind::Word2vec(cfg) => {
                let o = word2vec_sgd(&opt)?;
                Self::Word2vecSgd(match ck.as_deref_mut() {
                    Some(ck) => Word2Vec::from_checkpoint(cfg.clone(), o, ck)?,
                    None => Word2Vec::new(cfg.clone(), o, Vocab::from_file(&cfg.vocab_file)?)?,
                })
            }
            ModelKind::Lr(cfg) | ModelKind::Fm(cfg) => {
                let kind = match config.model {
                    ModelKind::Lr(_) => CtrKind::Lr,
                    _ => CtrKind::Fm,
                };
                let cfg = cfg.clone();
                match opt {
                    OptimizerConfig::Sgd { .. } => {
                        let o = opt.sgd().context("sgd settings")?;
                        Self::CtrSgd(match ck {
                            Some(ck) => Ctr::from_checkpoint(kind, cfg, o, ck)?,
                            None => Ctr::new(kind, cfg, o)?,
                        })
                    }
                    OptimizerConfig::Adagrad { .. } => {
                        let o = opt.adagrad().context("adagrad settings")?;
                        Self::CtrAdagrad(match ck {
                            Some(ck) => Ctr::from_checkpoint(kind, cfg, o, ck)?,
                            None => Ctr::new(kind, cfg, o)?,
                        })
                    }
                    OptimizerConfig::AdamAsync { .. } => {
                        let o = opt.adam_async().context("adam_async settings")?;
                        Self::CtrAdam(match ck {
                            Some(ck) => Ctr::from_checkpoint(kind, cfg, o, ck)?,
                            None => Ctr::new(kind, cfg, o)?,
                        })
                    }
                }
            }
        })
    }

    /// A model saved by [`AnyModel::save`]; its configuration comes from the checkpoint.
    pub fn load(path: &Path) -> Result<(ModelConfig, Self)> {
        Self::load_trained(path).map(|(config, model, _)| (config, model))
    }

    /// [`AnyModel::load`], with the epochs the model was trained for (0 for a checkpoint saved
    /// before they were stored).
    pub fn load_trained(path: &Path) -> Result<(ModelConfig, Self, usize)> {
        let mut ck = checkpoint::load(path)?;
        let config =
            ModelConfig::from_stored(&ck.meta, &format!("{} (stored config)", path.display()))?;
        let epochs = match ck.tables.iter().any(|t| t.name() == EPOCHS_TABLE) {
            true => ck.take_table(EPOCHS_TABLE, 1, 1)?.weights(0)[0].load() as usize,
            false => 0,
        };
        let model = Self::build(&config, Some(&mut ck))?;
        Ok((config, model, epochs))
    }

    /// Saves the model (atomically, with a checksum) and the number of epochs it was trained
    /// for, all runs together (`hogwild train --resume` numbers its epochs after them).
    pub fn save(&self, path: &Path, epochs: usize) -> Result<()> {
        // One weight, exact as an f32 up to 2^24 epochs; models read their own tables by name
        // and pass over this one.
        let trained = Table::with_layout(EPOCHS_TABLE, 1, 1, 0, &[])?;
        trained.write_weights(0, &[epochs as f32]);
        with_model!(self, m => {
            let mut tables = m.tables();
            tables.push(&trained);
            checkpoint::save(path, &m.describe(), &tables)
        })?;
        Ok(())
    }

    /// Bytes held by the parameter tables and their optimizer state.
    pub fn memory_bytes(&self) -> usize {
        with_model!(self, m => m.tables().iter().map(|t| t.memory_bytes()).sum())
    }
}

/// The MultiSlot files a model trains or evaluates on. For word2vec: with `input = "text"`, a
/// fresh model (`fresh`) first builds its vocabulary file from the text (a pass counting words,
/// `min_count` applied), then every text file is converted to ids in `<vocab_file>.ids/`; with
/// `input = "ids"`, a fresh model whose vocabulary file does not exist yet counts the ids of the
/// files. Other models read the files as given.
pub fn prepare_inputs(
    config: &ModelConfig,
    desc: &DataFeedDesc,
    files: Vec<PathBuf>,
    fresh: bool,
) -> Result<Vec<PathBuf>> {
    let ModelKind::Word2vec(cfg) = &config.model else {
        return Ok(files);
    };
    match cfg.input {
        Input::Ids => {
            if fresh && !cfg.vocab_file.exists() {
                let vocab = Vocab::count_ids(desc, &files, &cfg.words_slot)?;
                vocab.write(&cfg.vocab_file)?;
                println!(
                    "vocabulary: {} ids counted, written to {}",
                    vocab.len(),
                    cfg.vocab_file.display()
                );
            }
            Ok(files)
        }
        Input::Text => {
            let vocab = if fresh {
                let vocab = Vocab::count_text(&files, cfg.min_count)?;
                vocab.write(&cfg.vocab_file)?;
                println!(
                    "vocabulary: {} words seen at least {} times, written to {}",
                    vocab.len(),
                    cfg.min_count,
                    cfg.vocab_file.display()
                );
                vocab
            } else {
                Vocab::from_file(&cfg.vocab_file)?
            };
            Ok(text_to_ids(
                &vocab,
                &files,
                &ids_dir(cfg),
                cfg.max_sentence,
            )?)
        }
    }
}

/// Where text converted to ids is written.
fn ids_dir(cfg: &Word2VecConfig) -> PathBuf {
    let mut dir = cfg.vocab_file.clone().into_os_string();
    dir.push(".ids");
    PathBuf::from(dir)
}

/// Expands file arguments: plain paths, `@list` files (one path per line, relative to the list),
/// and `*` / `?` patterns in the last path component. The result is sorted per argument.
pub fn expand_files(args: &[String]) -> Result<Vec<PathBuf>> {
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
            out.push(PathBuf::from(arg));
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
        let files = prepare_inputs(&config, &desc, vec![text.clone()], true).unwrap();
        assert_eq!(std::fs::read_to_string(&vocab).unwrap(), "the 3\ncat 2\n");
        assert_eq!(
            files,
            vec![dir.path().join("w2v/vocab.txt.ids/0-a.txt.ids")]
        );
        assert_eq!(
            std::fs::read_to_string(&files[0]).unwrap(),
            "3 0 1 0\n2 0 1\n"
        );
        assert!(matches!(
            AnyModel::new(&config).unwrap(),
            AnyModel::Word2vecSgd(_)
        ));
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
