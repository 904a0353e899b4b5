//! Native models as TensorFlow SavedModels: one graph builder per model kind (`bow.rs`,
//! `ctr.rs`, `word2vec.rs`) that computes what the model's `predict` computes, from the slots
//! it reads, with stock TensorFlow ops only, so that `tf.saved_model.load` and TensorFlow
//! Serving load it without any op library. The weights are written as the SavedModel's
//! variables checkpoint; the graph holds none of them.
//!
//! The signature is `serving_default` (method `tensorflow/serving/predict`), its inputs the
//! slots in the runner's convention: a slot as `<slot>` values (int64 ids, float values) plus
//! `<slot>/row_splits` (int64, `[B+1]`), so instance `i` holds values
//! `row_splits[i]..row_splits[i+1]`.

mod bow;
mod checkpoint;
mod ctr;
mod graph;
mod hash;
mod train;
mod word2vec;

use std::path::{Path, PathBuf};

use prost::Message;

pub use bow::BowParts;
pub use ctr::CtrParts;
pub use train::{state_names, tf_train_graph, TrainTarget, CHECKPOINT_PREFIX, GRAPH_FILE};
pub use word2vec::Word2VecParts;

use crate::{Error, Result};

/// The signature a SavedModel serves.
pub const SERVING_SIGNATURE: &str = "serving_default";

/// The SavedModel tag of a serving graph.
const SERVE_TAG: &str = "serve";

/// TensorFlow Serving's method of a signature of named inputs and outputs.
const PREDICT_METHOD: &str = "tensorflow/serving/predict";

/// A model kind ready to export: the parts of a native model the graph builders read, borrowed
/// from it, whatever its optimizer (the optimizer matters only to [`tf_train_graph`]).
pub enum Exportable<'a> {
    /// A bag-of-words classifier: serves `probabilities` (float32 `[B, classes]`, and `labels`,
    /// string `[B, classes]`, when the labels have names) from the words slot.
    Bow(BowParts<'a>),
    /// A CTR model (LR, FM or FFM): serves `probability` (float32 `[B]`) from its field slots.
    Ctr(CtrParts<'a>),
    /// A word2vec model's vectors: serves `vectors` (float32 `[B, dim]`, zero for an unknown
    /// word) and `known` (bool `[B]`) from `words` (string `[B]`); it has no training graph.
    Word2Vec(Word2VecParts<'a>),
}

/// Writes `model` as a SavedModel directory `dir` (`saved_model.pb`, `variables/`) tagged
/// `serve`, with the [`SERVING_SIGNATURE`] signature. The directory is written beside `dir`
/// under a temporary name and renamed into place once whole; `dir` must not exist or be an
/// empty directory.
///
/// # Errors
///
/// [`Error::BadOption`] (`-o`) for a `dir` that is not empty or whose parent does not exist
/// (checked before anything is built); [`Error::Hogwild`] for a model configuration the graph
/// cannot express; [`Error::Io`] or [`Error::Run`] when writing fails, which leaves nothing
/// behind.
pub fn saved_model(model: &Exportable<'_>, dir: &Path) -> Result<()> {
    check_target(dir)?;
    let mut b = graph::Builder::new();
    let tensors = match model {
        Exportable::Bow(m) => bow::build(&mut b, m)?,
        Exportable::Ctr(m) => ctr::build(&mut b, m)?,
        Exportable::Word2Vec(m) => word2vec::build(&mut b, m)?,
    };
    let init = b.init_ops();
    let collections: Vec<(&str, Vec<String>)> = match init {
        Some(op) => vec![("saved_model_main_op", vec![op])],
        None => Vec::new(),
    };
    let meta = b.meta_graph(
        &[SERVE_TAG],
        SERVING_SIGNATURE,
        PREDICT_METHOD,
        &collections,
    )?;
    let saved = crate::proto::SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![meta],
    };
    write_dir(dir, |tmp| {
        let pb = tmp.join("saved_model.pb");
        std::fs::write(&pb, saved.encode_to_vec()).map_err(|source| Error::Io {
            path: pb.clone(),
            source,
        })?;
        let vars = tmp.join("variables");
        std::fs::create_dir(&vars).map_err(|source| Error::Io {
            path: vars.clone(),
            source,
        })?;
        checkpoint::write(&vars.join("variables"), &tensors)
    })
}

/// Refuses an output directory that holds anything, or a path that is not a directory, before
/// any work (a missing `dir` in an existing directory is fine: the export creates it).
///
/// # Errors
///
/// [`Error::BadOption`] (`-o`) naming `dir` and what is wrong; [`Error::Io`] when `dir` cannot
/// be read.
pub fn check_target(dir: &Path) -> Result<()> {
    let refuse = |reason: String| Error::BadOption {
        option: "-o",
        reason,
    };
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(refuse(format!(
            "{} exists and is not empty: give a new directory (nothing is replaced)",
            dir.display()
        ))),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = parent_of(dir);
            if parent.is_dir() {
                Ok(())
            } else {
                Err(refuse(format!(
                    "{}: the directory {} does not exist",
                    dir.display(),
                    parent.display()
                )))
            }
        }
        Err(_) if dir.exists() => Err(refuse(format!(
            "{} exists and is not a directory",
            dir.display()
        ))),
        Err(source) => Err(Error::Io {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

fn parent_of(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Fills a temporary directory beside `dir` with `fill` and renames it to `dir` (an empty
/// directory there is replaced); the temporary directory is removed when anything fails.
fn write_dir(dir: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".into());
    let tmp = parent_of(dir).join(format!(".{name}.partial-{}", std::process::id()));
    if tmp.exists() {
        // Left by an earlier run of this process id that was killed: ours to replace.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    std::fs::create_dir(&tmp).map_err(|source| Error::Io {
        path: tmp.clone(),
        source,
    })?;
    let done = fill(&tmp).and_then(|()| {
        check_target(dir)?;
        std::fs::rename(&tmp, dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })
    });
    if done.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    done
}

#[cfg(test)]
mod tests {
    use hogwild::models::{Bow, ModelConfig, ModelKind};
    use hogwild::optim::Sgd;
    use tensorflow::{Graph, SavedModelBundle, SessionOptions, SessionRunArgs, Tensor};

    use super::*;

    /// TensorFlow's C++ loader (`LoadSavedModel`, what TensorFlow Serving runs) restores the
    /// export and its signature gives the model's own probabilities.
    #[test]
    fn the_cpp_loader_serves_a_bow_model_as_it_predicts() {
        let config = ModelConfig::from_toml(
            "[model]\nkind = \"bow\"\nvocab = 20\nclasses = 3\ndim = 5\nbigram_buckets = 7\n\
             bias = true\n\n[optimizer]\nkind = \"sgd\"\nlr = 0.1\n",
            "test.toml",
        )
        .unwrap();
        let ModelKind::Bow(cfg) = config.model else {
            panic!("a bow config")
        };
        let m = Bow::new(cfg, Sgd { lr: 0.1 }).unwrap();
        m.init();
        // Output weights of every sign (a fresh model's are zero).
        for r in 0..m.output().rows() {
            let row: Vec<f32> = (0..6)
                .map(|k| ((r * 7 + k * 3) % 11) as f32 / 5.0 - 1.0)
                .collect();
            m.output().write_weights(r, &row);
        }
        let instances: [&[u64]; 3] = [&[3, 5, 7, 5], &[], &[19]];
        let mut w = m.new_worker();
        let want: Vec<Vec<f32>> = instances
            .iter()
            .map(|ids| m.predict_instance(&mut w, ids).unwrap().to_vec())
            .collect();

        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("bow");
        let parts = BowParts {
            config: m.config(),
            embedding: m.embedding(),
            output: m.output(),
            labels: m.labels(),
            label_counts: m.label_counts(),
        };
        saved_model(&Exportable::Bow(parts), &target).unwrap();

        let mut graph = Graph::new();
        let bundle =
            SavedModelBundle::load(&SessionOptions::new(), ["serve"], &mut graph, &target).unwrap();
        let signature = bundle
            .meta_graph_def()
            .get_signature(SERVING_SIGNATURE)
            .unwrap();
        let op = |name: &str| {
            let name = name.split(':').next().unwrap();
            graph.operation_by_name_required(name).unwrap()
        };
        let words: Vec<i64> = instances
            .iter()
            .flat_map(|i| i.iter().map(|&x| x as i64))
            .collect();
        let mut splits = vec![0i64];
        for i in instances {
            splits.push(splits.last().unwrap() + i.len() as i64);
        }
        let words_t = Tensor::new(&[words.len() as u64])
            .with_values(&words)
            .unwrap();
        let splits_t = Tensor::new(&[splits.len() as u64])
            .with_values(&splits)
            .unwrap();
        let mut args = SessionRunArgs::new();
        args.add_feed(
            &op(signature.get_input("words").unwrap().name().name.as_str()),
            0,
            &words_t,
        );
        let splits_name = &signature.get_input("words/row_splits").unwrap().name().name;
        args.add_feed(&op(splits_name), 0, &splits_t);
        let out = signature.get_output("probabilities").unwrap().name();
        let token = args.request_fetch(&op(&out.name), out.index);
        bundle.session.run(&mut args).unwrap();
        let got: Tensor<f32> = args.fetch(token).unwrap();
        assert_eq!(got.dims(), [3, 3]);
        for (i, want) in want.iter().enumerate() {
            for (c, &p) in want.iter().enumerate() {
                let g = got[i * 3 + c];
                assert!((g - p).abs() <= 1e-6, "instance {i}, class {c}: {g} vs {p}");
            }
        }
    }
}
