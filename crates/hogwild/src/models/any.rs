//! A model of any built-in kind with any optimizer, built from a configuration or loaded from a
//! checkpoint: what the `hogwild` commands work with, and the one loader for any saved model.

use std::path::Path;

use super::{Bow, Ctr, CtrKind, Labels, ModelConfig, ModelKind, OptimizerConfig, Vocab, Word2Vec};
use crate::checkpoint::{self, Section};
use crate::files::StaleTemps;
use crate::model::Model;
use crate::optim::{Adagrad, AdamAsync, Sgd};
use crate::tools::convert::Vocabulary;
use crate::{Error, Result};

/// A model of any built-in kind with any optimizer (each combination is its own compiled type,
/// so that the inner loops know their optimizer). [`with_model!`](crate::with_model) runs code
/// on the concrete model inside.
///
/// ```no_run
/// use hogwild::models::AnyModel;
/// use hogwild::tools::convert::Vocabulary;
///
/// # fn main() -> hogwild::Result<()> {
/// let (config, model) = AnyModel::load("model.ckpt")?; // any kind, any optimizer
/// println!("{}", config.to_toml());
/// let vocab = Vocabulary::load("vocab.txt")?;
/// for (label, p) in model.predict_text(&vocab, "a quiet, moving film", 2)? {
///     println!("{label} {p:.3}");
/// }
/// # Ok(()) }
/// ```
#[allow(clippy::enum_variant_names)] // model and optimizer, both part of each name
#[allow(clippy::large_enum_variant)] // one model per process: the enum's size does not matter
#[derive(Debug)]
pub enum AnyModel {
    /// A bag-of-words model trained with SGD.
    BowSgd(Bow<Sgd<f32>>),
    /// A bag-of-words model trained with Adagrad.
    BowAdagrad(Bow<Adagrad<f32>>),
    /// A bag-of-words model trained with AdamAsync.
    BowAdam(Bow<AdamAsync<f32>>),
    /// word2vec, which trains with plain SGD and a decaying learning rate.
    Word2vecSgd(Word2Vec),
    /// Logistic regression or a (field-aware) factorization machine trained with SGD.
    CtrSgd(Ctr<Sgd<f32>>),
    /// A CTR model trained with Adagrad.
    CtrAdagrad(Ctr<Adagrad<f32>>),
    /// A CTR model trained with AdamAsync.
    CtrAdam(Ctr<AdamAsync<f32>>),
}

/// Runs `$body` with `$m` bound to the concrete model inside an [`AnyModel`] (a reference when
/// `$any` is one), so that generic code (the executor's runs, [`crate::checkpoint::save_model`])
/// gets the compiled model.
///
/// ```no_run
/// use hogwild::models::AnyModel;
/// use hogwild::{with_model, Model};
///
/// # fn main() -> hogwild::Result<()> {
/// let (_, model) = AnyModel::load("model.ckpt")?;
/// let tables = with_model!(&model, m => m.tables().len());
/// # Ok(()) }
/// ```
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

/// The checkpoint section holding the epochs a model was trained for (a little-endian u64).
const EPOCHS_SECTION: &str = "trained_epochs";

/// Where a model's tables come from: none (a fresh model) or a loaded checkpoint.
type Source<'a> = Option<&'a mut checkpoint::Checkpoint>;

/// `opt`, which the configuration's optimizer kind says is there.
fn settings<T>(opt: Option<T>, kind: &str) -> Result<T> {
    opt.ok_or_else(|| Error::InvalidConfig {
        field: "optimizer".into(),
        reason: format!("no {kind} settings"),
    })
}

impl AnyModel {
    /// A fresh model (parameters not yet initialised: run the startup step,
    /// [`crate::executor::startup`]). A word2vec model takes `vocab`, or reads its configuration's
    /// vocabulary file when none is given.
    pub fn new(config: &ModelConfig, vocab: Option<Vocab>) -> Result<Self> {
        Self::build(config, None, vocab)
    }

    fn build(config: &ModelConfig, mut ck: Source<'_>, vocab: Option<Vocab>) -> Result<Self> {
        let opt = config.optimizer;
        let sgd = || settings(opt.sgd(), "sgd");
        let adagrad = || settings(opt.adagrad(), "adagrad");
        let adam = || settings(opt.adam_async(), "adam_async");
        Ok(match &config.model {
            ModelKind::Bow(cfg) => {
                let cfg = cfg.clone();
                match (opt, ck) {
                    (OptimizerConfig::Sgd { .. }, Some(ck)) => {
                        Self::BowSgd(Bow::from_checkpoint(cfg, sgd()?, ck)?)
                    }
                    (OptimizerConfig::Sgd { .. }, None) => Self::BowSgd(Bow::new(cfg, sgd()?)?),
                    (OptimizerConfig::Adagrad { .. }, Some(ck)) => {
                        Self::BowAdagrad(Bow::from_checkpoint(cfg, adagrad()?, ck)?)
                    }
                    (OptimizerConfig::Adagrad { .. }, None) => {
                        Self::BowAdagrad(Bow::new(cfg, adagrad()?)?)
                    }
                    (OptimizerConfig::AdamAsync { .. }, Some(ck)) => {
                        Self::BowAdam(Bow::from_checkpoint(cfg, adam()?, ck)?)
                    }
                    (OptimizerConfig::AdamAsync { .. }, None) => {
                        Self::BowAdam(Bow::new(cfg, adam()?)?)
                    }
                }
            }
            ModelKind::Word2vec(cfg) => {
                let o = opt.sgd().ok_or_else(|| Error::InvalidConfig {
                    field: "optimizer".into(),
                    reason: "word2vec trains with plain SGD and a linearly decaying learning \
                             rate: set [optimizer] kind = \"sgd\""
                        .into(),
                })?;
                Self::Word2vecSgd(match (ck.as_deref_mut(), vocab) {
                    (Some(ck), _) => Word2Vec::from_checkpoint(cfg.clone(), o, ck)?,
                    (None, Some(vocab)) => Word2Vec::new(cfg.clone(), o, vocab)?,
                    (None, None) => {
                        Word2Vec::new(cfg.clone(), o, Vocab::from_file(&cfg.vocab_file)?)?
                    }
                })
            }
            ModelKind::Lr(cfg) | ModelKind::Fm(cfg) | ModelKind::Ffm(cfg) => {
                let kind = match config.model {
                    ModelKind::Lr(_) => CtrKind::Lr,
                    ModelKind::Fm(_) => CtrKind::Fm,
                    _ => CtrKind::Ffm,
                };
                let cfg = cfg.clone();
                match (opt, ck) {
                    (OptimizerConfig::Sgd { .. }, Some(ck)) => {
                        Self::CtrSgd(Ctr::from_checkpoint(kind, cfg, sgd()?, ck)?)
                    }
                    (OptimizerConfig::Sgd { .. }, None) => {
                        Self::CtrSgd(Ctr::new(kind, cfg, sgd()?)?)
                    }
                    (OptimizerConfig::Adagrad { .. }, Some(ck)) => {
                        Self::CtrAdagrad(Ctr::from_checkpoint(kind, cfg, adagrad()?, ck)?)
                    }
                    (OptimizerConfig::Adagrad { .. }, None) => {
                        Self::CtrAdagrad(Ctr::new(kind, cfg, adagrad()?)?)
                    }
                    (OptimizerConfig::AdamAsync { .. }, Some(ck)) => {
                        Self::CtrAdam(Ctr::from_checkpoint(kind, cfg, adam()?, ck)?)
                    }
                    (OptimizerConfig::AdamAsync { .. }, None) => {
                        Self::CtrAdam(Ctr::new(kind, cfg, adam()?)?)
                    }
                }
            }
        })
    }

    /// A model saved by [`AnyModel::save`] or [`crate::checkpoint::save_model`], whatever its
    /// kind and optimizer, with the configuration stored in the checkpoint.
    pub fn load(path: impl AsRef<Path>) -> Result<(ModelConfig, Self)> {
        Self::load_trained(path).map(|(config, model, _)| (config, model))
    }

    /// [`AnyModel::load`], with the epochs the model was trained for (0 for a checkpoint saved
    /// without them, by [`crate::checkpoint::save_model`] or an older hogwild).
    pub fn load_trained(path: impl AsRef<Path>) -> Result<(ModelConfig, Self, usize)> {
        let path = path.as_ref();
        let mut ck = checkpoint::load(path)?;
        let config =
            ModelConfig::from_stored(&ck.meta, &format!("{} (stored config)", path.display()))?;
        let epochs = match ck.take_section(EPOCHS_SECTION) {
            Some(bytes) => {
                let bytes: [u8; 8] = bytes.try_into().map_err(|b: Vec<u8>| Error::Checkpoint {
                    path: path.display().to_string(),
                    reason: format!("section {EPOCHS_SECTION} holds {} bytes, not 8", b.len()),
                })?;
                u64::from_le_bytes(bytes) as usize
            }
            None => 0,
        };
        let model = Self::build(&config, Some(&mut ck), None)?;
        Ok((config, model, epochs))
    }

    /// Saves the model (atomically, with a checksum) and the number of epochs it was trained
    /// for, all runs together (`hogwild train --resume` numbers its epochs after them); returns
    /// the temporaries of interrupted earlier saves of `path` that were removed.
    pub fn save(&self, path: impl AsRef<Path>, epochs: usize) -> Result<StaleTemps> {
        let path = path.as_ref();
        let trained = Section {
            name: EPOCHS_SECTION.into(),
            bytes: (epochs as u64).to_le_bytes().to_vec(),
        };
        with_model!(self, m => {
            let mut sections = m.sections();
            sections.push(trained);
            checkpoint::save(path, &m.describe(), &sections, &m.tables())
        })
    }

    /// The `k` most probable labels of `text`, for a bag-of-words model
    /// ([`Bow::predict_text`]); other kinds classify no text.
    pub fn predict_text(
        &self,
        vocab: &Vocabulary,
        text: &str,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        match self {
            Self::BowSgd(m) => m.predict_text(vocab, text, k),
            Self::BowAdagrad(m) => m.predict_text(vocab, text, k),
            Self::BowAdam(m) => m.predict_text(vocab, text, k),
            _ => Err(Error::InvalidConfig {
                field: "model.kind".into(),
                reason: "text prediction needs a bag-of-words model (kind = \"bow\")".into(),
            }),
        }
    }

    /// A bag-of-words model's labels.
    pub fn labels(&self) -> Option<&Labels> {
        match self {
            Self::BowSgd(m) => Some(m.labels()),
            Self::BowAdagrad(m) => Some(m.labels()),
            Self::BowAdam(m) => Some(m.labels()),
            _ => None,
        }
    }

    /// Sets a new bag-of-words model's label counts ([`Bow::set_label_counts`]); other models
    /// have no labels to count.
    pub fn set_label_counts(&mut self, counts: Vec<u64>) -> Result<()> {
        match self {
            Self::BowSgd(m) => m.set_label_counts(counts),
            Self::BowAdagrad(m) => m.set_label_counts(counts),
            Self::BowAdam(m) => m.set_label_counts(counts),
            _ => Ok(()),
        }
    }

    /// A bag-of-words model's labels (names, prediction format, evaluation counts).
    pub fn labels_mut(&mut self) -> Option<&mut Labels> {
        match self {
            Self::BowSgd(m) => Some(m.labels_mut()),
            Self::BowAdagrad(m) => Some(m.labels_mut()),
            Self::BowAdam(m) => Some(m.labels_mut()),
            _ => None,
        }
    }

    /// A word2vec model's vocabulary.
    pub fn vocab(&self) -> Option<&Vocab> {
        match self {
            Self::Word2vecSgd(m) => Some(m.vocab()),
            _ => None,
        }
    }

    /// Bytes held by the parameter tables and their optimizer state.
    pub fn memory_bytes(&self) -> usize {
        with_model!(self, m => m.tables().iter().map(|t| t.memory_bytes()).sum())
    }
}
