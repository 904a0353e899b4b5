//! hogwild: fast asynchronous (Hogwild) training of sparse-feature models on CPU, and DeepRec's
//! AdamAsync optimizer.
//!
//! A text classifier from fastText-style lines: convert them to the MultiSlot format the feed
//! reads, train a bag-of-words model on every core, save it, load it back (whatever its kind),
//! and classify new text:
//!
//! ```
//! use hogwild::models::{AnyModel, Bow, BowConfig};
//! use hogwild::optim::AdamAsync;
//! use hogwild::tools::convert::{fasttext_desc, FastTextOptions, Vocabulary};
//! use hogwild::{checkpoint, executor, Run, RunOptions};
//!
//! # fn main() -> hogwild::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("hogwild-lib-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let text = "__label__sport a great match\n__label__film a great film\n".repeat(50);
//! let mut vocab = Vocabulary::default();
//! vocab.scan(text.as_bytes(), "train.txt", true)?;
//! let opts = FastTextOptions::default();
//! let train = dir.join("train.ids");
//! opts.convert(&vocab, text.as_bytes(), "train.txt", std::fs::File::create(&train)?)?;
//!
//! let cfg = BowConfig { vocab: opts.id_space(&vocab), classes: vocab.labels(), ..BowConfig::default() };
//! let model = Bow::new(cfg, AdamAsync::new(0.1f32, 0.9, 0.999, 1e-8))?;
//! executor::startup(&model);
//! let quiet = RunOptions { print_period: 0, ..RunOptions::default() };
//! Run::new(&model, &fasttext_desc()).options(&quiet).train(&[&train])?;
//! checkpoint::save_model(dir.join("model.ckpt"), &model)?;
//!
//! let (_config, loaded) = AnyModel::load(dir.join("model.ckpt"))?;
//! let top = loaded.predict_text(&vocab, "what a match", 1)?;
//! assert_eq!(top[0].0, "__label__sport");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```
//!
//! # Where things are
//!
//! - [`model::Model`]: what the executor needs from a model; the built-in ones are in
//!   [`models`] ([`models::Bow`], [`models::Word2Vec`], [`models::Ctr`]), with their
//!   configuration file ([`models::ModelConfig`]) and [`models::AnyModel`], which builds or
//!   loads any of them. [`model`]'s documentation trains a model of your own.
//! - [`executor`]: [`Run`] trains, evaluates and predicts in worker threads from files.
//! - [`feed`]: the data feed and its `DataFeedDesc` (Paddle's `data.prototxt`); [`tools`]
//!   converts fastText, libsvm/libffm, VW and CSV input to its MultiSlot format.
//! - [`store`]: the parameter tables ([`Table`]) shared by every thread without locks.
//! - [`optim`]: AdamAsync, Adagrad and SGD on slices, ndarray views and shared cells.
//! - [`checkpoint`]: saving and loading tables; [`vectors`]: word-vector queries.
//!
//! # The MultiSlot format
//!
//! One instance per line; every slot of the desc, used or not, in the desc's order, each as
//! its number of values followed by the values: with slots `words` (uint64) and `label`
//! (uint64), the line `3 12 7 40 1 0` is words `[12, 7, 40]` and label `[0]`. Every slot holds
//! at least one value; a dense slot (`is_dense: true` with a `shape`) holds the same number on
//! every line. Files may be gzip-compressed or piped through the desc's `pipe_command`. A bad
//! line is an error naming the file, the line and the slot ([`Error::Parse`]), or is skipped
//! within a budget ([`feed::ErrorPolicy`]).
//!
//! # Versions
//!
//! The numeric API takes views of ndarray 0.16, re-exported as [`ndarray`]: use
//! `hogwild::ndarray`, and no version of your own can differ. Errors are one enum,
//! [`Error`], that converts from [`std::io::Error`] and holds a model of your own's failures
//! ([`Error::model`]).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod channel;
pub mod checkpoint;
mod error;
pub mod executor;
pub mod feed;
pub mod files;
pub mod metrics;
pub mod model;
pub mod models;
pub mod optim;
pub mod rng;
pub mod store;
pub mod subwords;
pub mod tools;
pub mod vectors;

pub use error::{Error, Result};
pub use executor::{startup, Run, RunOptions, RunReport};
pub use feed::{Batch, DataFeedDesc, FeedMode, FeedOptions, SlotBatch, SlotValues};
pub use model::Model;
/// The ndarray the numeric API takes views of ([`optim`]'s `*_view` functions): use this
/// re-export (`hogwild::ndarray`) rather than a dependency of your own, whose version could
/// differ (ndarray 0.16 here).
pub use ndarray;
pub use store::{Drawn, Table};
