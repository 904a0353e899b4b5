//! Built-in models and their configuration file.
//!
//! A model configuration is a TOML file (TOML: comments, typed numbers, sections, one obvious way to
//! write each value, and a well-kept parser in `toml` + `serde`). Example:
//!
//! ```toml
//! [model]
//! kind = "bow"          # bag-of-words text classifier
//! vocab = 30000         # word ids are < vocab
//! classes = 5
//! dim = 10
//! bigram_buckets = 2000000   # 0 disables hashed word bigrams
//! subword_buckets = 0   # character n-gram buckets (`hogwild convert --minn --maxn`)
//! pool = "mean"         # or "sum"
//!
//! [optimizer]
//! kind = "adam_async"   # or "sgd", "adagrad"
//! lr = 0.01
//! ```
//!
//! Other kinds: `word2vec` ([`Word2VecConfig`]: skip-gram or CBOW with negative sampling), `lr`,
//! `fm` and `ffm` ([`CtrConfig`]: logistic regression, factorization machines and field-aware
//! ones over hashed fields, with feature values, libffm field numbers and importance weights when
//! their slots are named); see
//! `examples/word2vec/` and `examples/ctr/` for complete configurations.

mod any;
mod bow;
mod ctr;
mod huffman;
mod labels;
mod loss;
mod word2vec;

pub use any::AnyModel;
pub use bow::{Bow, BowConfig, BowWorker, LrSchedule, Pool};
pub use ctr::{Ctr, CtrConfig, CtrKind, CtrWorker};
pub use huffman::{Huffman, Node};
pub use labels::{format_general, write_general, Labels, PredictionFormat, TopK, LABELS_SECTION};
pub use loss::Loss;
pub(crate) use word2vec::dot;
pub use word2vec::{
    text_to_ids, vector_line, Arch, Input, Vocab, VocabSource, Word2Vec, Word2VecConfig,
    Word2VecWorker,
};

use serde::{Deserialize, Serialize};

use crate::feed::DataFeedDesc;
use crate::optim::{Adagrad, AdamAsync, AdamCoeffs, Sgd};
use crate::{Error, Result};

/// The error of an evaluation whose desc lacks the label slot its metrics are measured against.
pub(crate) fn missing_label(slot: &str) -> Error {
    Error::InvalidConfig {
        field: "label_slot".into(),
        reason: format!(
            "evaluation needs the used slot \"{slot}\" in the DataFeedDesc to measure against \
             (predictions do without it)"
        ),
    }
}

/// A whole model configuration file: the model and its optimizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The `[model]` section: the kind and its settings.
    pub model: ModelKind,
    /// The `[optimizer]` section.
    pub optimizer: OptimizerConfig,
}

/// Which model, with its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelKind {
    /// The bag-of-words text classifier.
    Bow(BowConfig),
    /// word2vec: skip-gram or CBOW with negative sampling.
    Word2vec(Word2VecConfig),
    /// Logistic regression over hashed fields.
    Lr(CtrConfig),
    /// A factorization machine over hashed fields.
    Fm(CtrConfig),
    /// A field-aware factorization machine over hashed fields.
    Ffm(CtrConfig),
}

impl ModelKind {
    /// Which CTR model this is, with its settings (None for the other models).
    pub fn ctr(&self) -> Option<(CtrKind, &CtrConfig)> {
        match self {
            Self::Lr(c) => Some((CtrKind::Lr, c)),
            Self::Fm(c) => Some((CtrKind::Fm, c)),
            Self::Ffm(c) => Some((CtrKind::Ffm, c)),
            Self::Bow(_) | Self::Word2vec(_) => None,
        }
    }
}

/// The optimizer and its hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum OptimizerConfig {
    /// Plain SGD ([`Sgd`]).
    Sgd {
        /// The learning rate.
        lr: f32,
    },
    /// Adagrad ([`Adagrad`]).
    Adagrad {
        /// The learning rate.
        lr: f32,
        /// The accumulator's start (default 0.1).
        #[serde(default = "default_accumulator")]
        initial_accumulator: f32,
    },
    /// AdamAsync ([`AdamAsync`]).
    AdamAsync {
        /// The learning rate.
        lr: f32,
        /// The first moment's decay (default 0.9).
        #[serde(default = "default_beta1")]
        beta1: f32,
        /// The second moment's decay (default 0.999).
        #[serde(default = "default_beta2")]
        beta2: f32,
        /// Added to the root of the second moment (default 1e-8).
        #[serde(default = "default_epsilon")]
        epsilon: f32,
        /// Sparse rows use the RMSProp rule (DeepRec's `apply_sparse_rmsprop`).
        #[serde(default)]
        rmsprop: bool,
        /// Nesterov momentum on dense updates (default off).
        #[serde(default)]
        nesterov: bool,
    },
}

fn default_accumulator() -> f32 {
    0.1
}
fn default_beta1() -> f32 {
    0.9
}
fn default_beta2() -> f32 {
    0.999
}
fn default_epsilon() -> f32 {
    1e-8
}

impl OptimizerConfig {
    /// The learning rate.
    pub fn lr(&self) -> f32 {
        match *self {
            Self::Sgd { lr } | Self::Adagrad { lr, .. } | Self::AdamAsync { lr, .. } => lr,
        }
    }

    /// The same optimizer with learning rate `lr`.
    pub fn with_lr(mut self, lr: f32) -> Self {
        match &mut self {
            Self::Sgd { lr: at }
            | Self::Adagrad { lr: at, .. }
            | Self::AdamAsync { lr: at, .. } => *at = lr,
        }
        self
    }

    /// Checks the hyper-parameters before anything trains: `lr` finite and positive, Adagrad's
    /// `initial_accumulator` finite and positive, AdamAsync's `beta1` and `beta2` in `[0, 1)`
    /// and `epsilon` finite and positive (a step divides by `sqrt(v) + epsilon`, and `v` is 0
    /// where a gradient was always 0). Errors name the key (`optimizer.lr`).
    pub fn validate(&self) -> Result<()> {
        positive("optimizer.lr", self.lr())?;
        match *self {
            Self::Sgd { .. } => Ok(()),
            Self::Adagrad {
                initial_accumulator,
                ..
            } => positive("optimizer.initial_accumulator", initial_accumulator),
            Self::AdamAsync {
                lr,
                beta1,
                beta2,
                epsilon,
                ..
            } => {
                // The kernels' own checks of the betas, made now instead of at the first step.
                AdamCoeffs::new_rmsprop(lr, beta1, beta2, epsilon).map_err(|e| match e {
                    Error::InvalidHyperParameter {
                        name,
                        value,
                        reason,
                    } => Error::InvalidConfig {
                        field: format!("optimizer.{name}"),
                        // Shown as the f32 the file gave (-1e-8, not -0.0000000099999999).
                        reason: format!("{} {reason}", value as f32),
                    },
                    other => other,
                })?;
                positive("optimizer.epsilon", epsilon)
            }
        }
    }

    /// SGD's parameters, when this is SGD.
    pub fn sgd(&self) -> Option<Sgd<f32>> {
        match *self {
            Self::Sgd { lr } => Some(Sgd { lr }),
            _ => None,
        }
    }
    /// Adagrad's parameters, when this is Adagrad.
    pub fn adagrad(&self) -> Option<Adagrad<f32>> {
        match *self {
            Self::Adagrad {
                lr,
                initial_accumulator,
            } => Some(Adagrad {
                lr,
                initial_accumulator,
            }),
            _ => None,
        }
    }
    /// AdamAsync's parameters, when this is AdamAsync.
    pub fn adam_async(&self) -> Option<AdamAsync<f32>> {
        match *self {
            Self::AdamAsync {
                lr,
                beta1,
                beta2,
                epsilon,
                rmsprop,
                nesterov,
            } => Some(AdamAsync {
                lr,
                beta1,
                beta2,
                epsilon,
                use_nesterov: nesterov,
                apply_sparse_rmsprop: rmsprop,
            }),
            _ => None,
        }
    }
}

/// Refuses a value of `field` that is not finite and above zero.
fn positive(field: &str, value: f32) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        field: field.into(),
        reason: format!("{value} must be finite and above 0"),
    })
}

/// An optimizer that can write itself back as configuration (for checkpoints).
pub trait OptimizerDesc {
    /// The configuration that builds this optimizer again.
    fn describe(&self) -> OptimizerConfig;
}

impl OptimizerDesc for Sgd<f32> {
    fn describe(&self) -> OptimizerConfig {
        OptimizerConfig::Sgd { lr: self.lr }
    }
}

impl OptimizerDesc for Adagrad<f32> {
    fn describe(&self) -> OptimizerConfig {
        OptimizerConfig::Adagrad {
            lr: self.lr,
            initial_accumulator: self.initial_accumulator,
        }
    }
}

impl OptimizerDesc for AdamAsync<f32> {
    fn describe(&self) -> OptimizerConfig {
        OptimizerConfig::AdamAsync {
            lr: self.lr,
            beta1: self.beta1,
            beta2: self.beta2,
            epsilon: self.epsilon,
            rmsprop: self.apply_sparse_rmsprop,
            nesterov: self.use_nesterov,
        }
    }
}

/// A zeroed scratch buffer of `len` floats for a worker, with 128 unused bytes after it. The
/// executor creates every worker on one thread, so their buffers come from one heap, side by
/// side: without the gap, the end of one worker's buffer (written for every pair or instance)
/// and the start of the next worker's could share a cache line, which would then move between
/// the cores on every write.
pub(crate) fn padded(len: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(len + 32);
    v.resize(len, 0.0);
    v
}

impl ModelConfig {
    /// Parses a configuration from TOML text and checks its values ([`ModelConfig::validate`]);
    /// `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self> {
        let config = Self::parse(text, origin)?;
        config.validate_in(origin)?;
        Ok(config)
    }

    fn parse(text: &str, origin: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| match Self::culprit(text) {
            Some(key) => Error::InvalidConfig {
                field: format!("{origin}: {key}"),
                reason: e.message().trim_end().to_string(),
            },
            None => Error::InvalidConfig {
                field: origin.to_string(),
                reason: e.to_string().trim_end().to_string(),
            },
        })
    }

    /// The key (`model.buckets`) whose value makes `text`, valid TOML, no configuration, when
    /// one key does. serde reads the `[model]` and `[optimizer]` sections through a buffer to
    /// find their `kind` first, so a value of the wrong type is reported at the section's
    /// header, without its key. Each section is read alone, and again with each key left out
    /// in turn: a value of the wrong type fails as soon as it is read, before any missing key
    /// would, so the key without which the section reads, or fails otherwise, is the culprit.
    fn culprit(text: &str) -> Option<String> {
        fn error<T: serde::de::DeserializeOwned>(section: &toml::Table) -> Option<String> {
            let value = toml::Value::Table(section.clone());
            value.try_into::<T>().err().map(|e| e.message().to_string())
        }
        fn find<T: serde::de::DeserializeOwned>(section: &toml::Table) -> Option<&String> {
            let first = error::<T>(section)?;
            section.keys().filter(|k| *k != "kind").find(|&key| {
                let mut probe = section.clone();
                probe.remove(key);
                error::<T>(&probe).as_ref() != Some(&first)
            })
        }
        let doc: toml::Table = toml::from_str(text).ok()?;
        let section = |name: &str| match doc.get(name) {
            Some(toml::Value::Table(t)) => Some(t),
            _ => None,
        };
        if let Some(key) = section("model").and_then(find::<ModelKind>) {
            return Some(format!("model.{key}"));
        }
        let key = section("optimizer").and_then(find::<OptimizerConfig>)?;
        Some(format!("optimizer.{key}"))
    }

    /// Checks every value the model and its optimizer would refuse, so that a mistake is found
    /// before data is read rather than by a worker at the first batch: the optimizer's
    /// hyper-parameters ([`OptimizerConfig::validate`]), the model's sizes and settings, and the
    /// optimizer a model needs (word2vec: SGD). The models' constructors check the same.
    pub fn validate(&self) -> Result<()> {
        self.optimizer.validate()?;
        match &self.model {
            ModelKind::Bow(c) => c.check(),
            ModelKind::Word2vec(c) => {
                if self.optimizer.sgd().is_none() {
                    return Err(Error::InvalidConfig {
                        field: "optimizer.kind".into(),
                        reason: "word2vec trains with plain SGD and a linearly decaying \
                                 learning rate: set [optimizer] kind = \"sgd\""
                            .into(),
                    });
                }
                c.check(self.optimizer.lr())
            }
            ModelKind::Lr(c) => c.check(CtrKind::Lr),
            ModelKind::Fm(c) => c.check(CtrKind::Fm),
            ModelKind::Ffm(c) => c.check(CtrKind::Ffm),
        }
    }

    /// [`ModelConfig::validate`], with the key named as in `origin` (`model.toml: optimizer.lr`).
    fn validate_in(&self, origin: &str) -> Result<()> {
        self.validate().map_err(|e| match e {
            Error::InvalidConfig { field, reason } => Error::InvalidConfig {
                field: format!("{origin}: {field}"),
                reason,
            },
            other => other,
        })
    }

    /// Whether the model can read batches laid out by `desc`: every slot the configuration
    /// names is a used slot of the right type, and for `training` the label (and the
    /// importance weights, when named) are there too. The executor finds the same when a run
    /// starts its workers; this finds it before any data is read, without a model.
    pub fn check_desc(&self, desc: &DataFeedDesc, training: bool) -> Result<()> {
        match &self.model {
            ModelKind::Bow(c) => c.check_desc(desc, training),
            ModelKind::Word2vec(c) => c.check_desc(desc),
            ModelKind::Lr(c) => c.check_desc(CtrKind::Lr, desc, training),
            ModelKind::Fm(c) => c.check_desc(CtrKind::Fm, desc, training),
            ModelKind::Ffm(c) => c.check_desc(CtrKind::Ffm, desc, training),
        }
    }

    /// The used slots of `desc` that the model reads through no key of its configuration, each
    /// as a sentence naming the slot and the key that would read it (or `is_used: false`): a
    /// model trains on such a slot as if it were absent, so a libsvm file's `values` slot left
    /// unread trains as if every value were 1. Empty when every used slot is read; an error
    /// when the desc does not fit the model ([`ModelConfig::check_desc`]).
    pub fn unread_slots(&self, desc: &DataFeedDesc) -> Result<Vec<String>> {
        let (read, keys): (Vec<&str>, &str) = match &self.model {
            ModelKind::Lr(c) => return c.unread_slots(CtrKind::Lr, desc),
            ModelKind::Fm(c) => return c.unread_slots(CtrKind::Fm, desc),
            ModelKind::Ffm(c) => return c.unread_slots(CtrKind::Ffm, desc),
            ModelKind::Bow(c) => (
                vec![&c.words_slot, &c.label_slot],
                "bow reads its words_slot and label_slot only",
            ),
            ModelKind::Word2vec(c) => (vec![&c.words_slot], "word2vec reads its words_slot only"),
        };
        self.check_desc(desc, false)?;
        Ok(desc
            .used_slots()
            .iter()
            .filter(|s| !read.contains(&s.name.as_str()))
            .map(|s| {
                format!(
                    "used slot \"{}\" ({}) is read through no key of the model ({keys}): set \
                     is_used: false for it in the desc",
                    s.name,
                    s.slot_type().name()
                )
            })
            .collect())
    }

    /// Parses the configuration stored in a checkpoint; `origin` names it in errors. Checkpoints
    /// written before a setting existed are read as the model they hold: a bag-of-words model
    /// without `end_of_text` has no end-of-text row, one without `bias` has its biases, and a
    /// word2vec model's `epochs` (now the run's) is dropped.
    pub fn from_stored(text: &str, origin: &str) -> Result<Self> {
        let mut config = Self::parse(text, origin)?;
        let stored: toml::Table = toml::from_str(text).unwrap_or_default();
        let has = |key: &str| {
            stored
                .get("model")
                .and_then(|m| m.as_table())
                .is_some_and(|m| m.contains_key(key))
        };
        match &mut config.model {
            ModelKind::Bow(c) => {
                c.end_of_text &= has("end_of_text");
                c.bias |= !has("bias");
            }
            ModelKind::Word2vec(c) => c.epochs = None,
            _ => {}
        }
        config.validate_in(origin)?;
        Ok(config)
    }

    /// Reads and parses a configuration file.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: format!("cannot read the model config: {e}"),
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// The configuration as TOML text (stored in checkpoints).
    pub fn to_toml(&self) -> String {
        // A struct of plain numbers, strings and enums always serializes.
        toml::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_buffers_are_zero_with_room_after_them() {
        for len in [0, 1, 100] {
            let v = padded(len);
            assert_eq!(v, vec![0.0; len]);
            assert!(v.capacity() >= len + 32);
        }
    }

    const EXAMPLE: &str = r#"
[model]
kind = "bow"
vocab = 30000
classes = 5
dim = 10
bigram_buckets = 2000000
pool = "mean"

[optimizer]
kind = "adam_async"
lr = 0.01
"#;

    #[test]
    fn example_parses_with_defaults_and_round_trips() {
        let c = ModelConfig::from_toml(EXAMPLE, "model.toml").unwrap();
        let ModelKind::Bow(b) = &c.model else {
            panic!("parsed as {:?}", c.model)
        };
        assert_eq!((b.vocab, b.classes, b.dim), (30000, 5, 10));
        assert_eq!(b.words_slot, "words");
        let adam = c.optimizer.adam_async().unwrap();
        assert_eq!((adam.beta1, adam.beta2, adam.epsilon), (0.9, 0.999, 1e-8));
        assert!(c.optimizer.sgd().is_none() && c.optimizer.adagrad().is_none());
        let again = ModelConfig::from_toml(&c.to_toml(), "saved").unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn stored_configs_from_before_a_setting_read_as_the_model_they_hold() {
        // A bag-of-words checkpoint written before the end-of-text row has no such row.
        let old = ModelConfig::from_stored(EXAMPLE, "old.ckpt").unwrap();
        let ModelKind::Bow(b) = &old.model else {
            panic!("{:?}", old.model)
        };
        assert!(!b.end_of_text);
        assert!(b.bias);
        // A new one stores the settings, and a new config file gets the row and no biases by
        // default.
        let new = ModelConfig::from_toml(EXAMPLE, "model.toml").unwrap();
        let again = ModelConfig::from_stored(&new.to_toml(), "new.ckpt").unwrap();
        assert_eq!(again, new);
        let ModelKind::Bow(b) = &again.model else {
            panic!("{:?}", again.model)
        };
        assert!(b.end_of_text);
        assert!(!b.bias);
        // A word2vec checkpoint that stored the decay's epochs loads; a config file is refused.
        let w2v = "[model]\nkind = \"word2vec\"\nvocab_file = \"v.txt\"\nepochs = 5\n\n\
                   [optimizer]\nkind = \"sgd\"\nlr = 0.025\n";
        let stored = ModelConfig::from_stored(w2v, "w2v.ckpt").unwrap();
        assert!(matches!(&stored.model, ModelKind::Word2vec(c) if c.epochs.is_none()));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w2v.toml");
        std::fs::write(&path, w2v).unwrap();
        let e = ModelConfig::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("epochs = 5") && e.contains("--epochs"), "{e}");
    }

    // Every value a model or optimizer would refuse at its first step (or never, training on to
    // NaN) is refused when the file is read, naming the file, the key and the value.
    #[test]
    fn bad_values_are_refused_when_the_config_is_read() {
        let bow = |model: &str, optimizer: &str| {
            format!(
                "[model]\nkind = \"bow\"\nvocab = 10\nclasses = 2\n{model}\n\
                 [optimizer]\n{optimizer}\n"
            )
        };
        // `model` holds the rows (`buckets`) when it sets them.
        let ctr = |kind: &str, model: &str| {
            let buckets = if model.contains("buckets") {
                ""
            } else {
                "buckets = 64"
            };
            format!(
                "[model]\nkind = \"{kind}\"\n{buckets}\n{model}\n\
                 [optimizer]\nkind = \"sgd\"\nlr = 0.1\n"
            )
        };
        let w2v = |model: &str, optimizer: &str| {
            format!(
                "[model]\nkind = \"word2vec\"\nvocab_file = \"v.txt\"\n{model}\n\
                 [optimizer]\n{optimizer}\n"
            )
        };
        let adam = |extra: &str| format!("kind = \"adam_async\"\nlr = 0.01\n{extra}");
        let cases = [
            (bow("", "kind = \"sgd\"\nlr = -1"), "optimizer.lr", "-1"),
            (bow("", "kind = \"sgd\"\nlr = 0"), "optimizer.lr", "0"),
            (bow("", "kind = \"sgd\"\nlr = nan"), "optimizer.lr", "NaN"),
            (
                bow("", "kind = \"adagrad\"\nlr = inf"),
                "optimizer.lr",
                "inf",
            ),
            (
                bow("", "kind = \"adagrad\"\nlr = 0.1\ninitial_accumulator = 0"),
                "optimizer.initial_accumulator",
                "0",
            ),
            (bow("", &adam("beta1 = 1.5")), "optimizer.beta1", "1.5"),
            (bow("", &adam("beta1 = -0.1")), "optimizer.beta1", "-0.1"),
            (bow("", &adam("beta2 = 1.0")), "optimizer.beta2", "1"),
            (
                bow("", &adam("epsilon = -1e-8")),
                "optimizer.epsilon",
                "-0.00000001 ",
            ),
            (bow("", &adam("epsilon = 0")), "optimizer.epsilon", "0"),
            (bow("dim = 0", &adam("")), "dim", "at least 1"),
            (
                bow("loss = \"ns\"\nnegative = 0", &adam("")),
                "negative",
                "at least 1",
            ),
            (bow("lr_hold = 1.5", &adam("")), "lr_hold", "below 1"),
            (
                bow("label_slot = \"words\"", &adam("")),
                "label_slot",
                "words_slot",
            ),
            (ctr("lr", "buckets = 0"), "buckets", "at least 1"),
            (ctr("lr", "l2 = -1"), "l2", "-1"),
            (ctr("fm", "dim = 0"), "dim", "at least 1"),
            (ctr("fm", "init_scale = nan"), "init_scale", "NaN"),
            (ctr("lr", "dim = 4"), "dim", "no factors"),
            (
                w2v("min_lr = 1", "kind = \"sgd\"\nlr = 0.025"),
                "min_lr",
                "1",
            ),
            (
                w2v("window = 0", "kind = \"sgd\"\nlr = 0.025"),
                "window",
                "at least 1",
            ),
            (w2v("", &adam("")), "optimizer.kind", "sgd"),
        ];
        for (text, key, value) in cases {
            let e = ModelConfig::from_toml(&text, "m.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("m.toml: {key}: ")) && e.contains(value),
                "{key} = {value}: {e}"
            );
        }
        // A word2vec architecture other than the two is named with the choices.
        for arch in ["\"cbw\"", "0"] {
            let text = w2v(&format!("arch = {arch}"), "kind = \"sgd\"\nlr = 0.025");
            let e = ModelConfig::from_toml(&text, "m.toml")
                .unwrap_err()
                .to_string();
            let expected =
                format!("arch = {arch}: expected \"skipgram\" (gensim's sg=1) or \"cbow\"");
            assert!(e.contains("m.toml") && e.contains(&expected), "{e}");
        }
        // The same checks guard a configuration built in code.
        let mut c = ModelConfig::from_toml(EXAMPLE, "model.toml").unwrap();
        c.optimizer = OptimizerConfig::Sgd { lr: -0.5 };
        let e = c.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "model config: optimizer.lr: -0.5 must be finite and above 0"
        );
    }

    // A value of the wrong type is named by its key, in every model's section and the
    // optimizer's, though serde reads the tagged sections through a buffer that loses it; a
    // file that is not TOML keeps the parser's line and column.
    #[test]
    fn values_of_the_wrong_type_are_named_by_their_key() {
        let text =
            |model: &str, optimizer: &str| format!("[model]\n{model}\n[optimizer]\n{optimizer}\n");
        let sgd = "kind = \"sgd\"\nlr = 0.1";
        let cases = [
            (
                text("kind = \"ffm\"\nbuckets = \"many\"\ndim = 4", sgd),
                "model.buckets",
                "invalid type: string \"many\", expected usize",
            ),
            (
                text("kind = \"word2vec\"\nvocab_file = \"v.txt\"\nhs = 1", sgd),
                "model.hs",
                "invalid type: integer `1`, expected a boolean",
            ),
            (
                text("kind = \"bow\"\nvocab = 10\nclasses = [2]", sgd),
                "model.classes",
                "invalid type: sequence",
            ),
            (
                text(
                    "kind = \"lr\"\nbuckets = 64",
                    "kind = \"adagrad\"\nlr = \"0.2\"",
                ),
                "optimizer.lr",
                "invalid type: string \"0.2\", expected f32",
            ),
            (
                text(
                    "kind = \"lr\"\nbuckets = 64",
                    "kind = \"adam_async\"\nlr = 0.1\nnesterov = \"yes\"",
                ),
                "optimizer.nesterov",
                "expected a boolean",
            ),
        ];
        for (text, key, message) in cases {
            let e = ModelConfig::from_toml(&text, "m.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("m.toml: {key}: ")) && e.contains(message),
                "{key}: {e}"
            );
        }
        let e = ModelConfig::from_toml("[model]\nkind = \"lr\"\nbuckets = = 3\n", "m.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.toml") && e.contains("line 3"), "{e}");
    }

    #[test]
    fn the_slots_a_config_names_are_checked_against_a_desc_without_a_model() {
        let desc = |slots: &[(&str, &str)]| {
            let slots: String = slots
                .iter()
                .map(|(name, ty)| {
                    format!("slots {{ name: \"{name}\" type: \"{ty}\" is_used: true }} ")
                })
                .collect();
            DataFeedDesc::from_text(&format!("multi_slot_desc {{ {slots} }}")).unwrap()
        };
        let ctr = ModelConfig::from_toml(
            "[model]\nkind = \"lr\"\nbuckets = 64\nweight_slot = \"w\"\n\n\
             [optimizer]\nkind = \"sgd\"\nlr = 0.1\n",
            "lr.toml",
        )
        .unwrap();
        let no_weight = desc(&[("a", "uint64"), ("label", "uint64")]);
        // Prediction reads neither the label nor the weights; training needs both.
        ctr.check_desc(&no_weight, false).unwrap();
        let e = ctr.check_desc(&no_weight, true).unwrap_err().to_string();
        assert!(e.contains("weight_slot") && e.contains("\"w\""), "{e}");
        let e = ctr
            .check_desc(&desc(&[("a", "uint64"), ("w", "float")]), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("label_slot"), "{e}");
        ctr.check_desc(
            &desc(&[("a", "uint64"), ("label", "uint64"), ("w", "float")]),
            true,
        )
        .unwrap();
        let e = ctr
            .check_desc(
                &desc(&[("a", "uint64"), ("label", "uint64"), ("w", "uint64")]),
                true,
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("weight_slot") && e.contains("float"), "{e}");

        let bow = ModelConfig::from_toml(EXAMPLE, "model.toml").unwrap();
        let words = desc(&[("words", "uint64")]);
        bow.check_desc(&words, false).unwrap();
        let e = bow.check_desc(&words, true).unwrap_err().to_string();
        assert!(e.contains("label"), "{e}");
        let e = bow
            .check_desc(&desc(&[("text", "uint64")]), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("words_slot") && e.contains("\"words\""), "{e}");

        let w2v = ModelConfig::from_toml(
            "[model]\nkind = \"word2vec\"\nvocab_file = \"v.txt\"\n\n\
             [optimizer]\nkind = \"sgd\"\nlr = 0.025\n",
            "w2v.toml",
        )
        .unwrap();
        w2v.check_desc(&words, true).unwrap();
        let e = w2v
            .check_desc(&desc(&[("words", "float")]), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("uint64"), "{e}");
    }

    #[test]
    fn mistakes_name_the_file_and_field() {
        let e = ModelConfig::from_toml(&EXAMPLE.replace("vocab", "vocabulary"), "m.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.toml") && e.contains("vocab"), "{e}");
        let e = ModelConfig::from_toml(&EXAMPLE.replace("adam_async", "adam"), "m.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("adam"), "{e}");
        let e = ModelConfig::from_file(std::path::Path::new("/no/such.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/no/such.toml"), "{e}");
    }
}
