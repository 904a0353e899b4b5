//! `hogwild export`: a saved model in another format. `--format word2vec` (the default for
//! word2vec models) writes a word2vec model's vectors in word2vec's text format;
//! `--format saved-model` (the default for the others; built with the `tf` feature) writes any
//! model as a TensorFlow SavedModel directory whose `serving_default` signature predicts what
//! `hogwild predict` does (docs/export.md).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args as ClapArgs, ValueEnum};

use crate::models::AnyModel;
use crate::paths;
use crate::say;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// A model saved by `hogwild train --save`.
    #[arg(long)]
    pub model: PathBuf,
    /// What to write: `word2vec` (a word2vec model's vectors as text; the default for word2vec
    /// models), `saved-model` (a TensorFlow SavedModel directory; the default for the others) or
    /// `tf-train` (a directory with a training graph for `hogwild tf-train` and its checkpoint).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// The DataFeedDesc the model reads (CTR models whose configuration does not list its
    /// `fields` take every used uint64 slot of it but the label as a field, as in training).
    #[arg(long)]
    pub feed: Option<PathBuf>,
    /// `--format tf-train` of an adam_async model: the op library of DeepRec's AdamAsync ops
    /// (build/plugin/libadam_async_ops.so), which the training graph uses (repeatable).
    #[arg(long = "op-library")]
    pub op_libraries: Vec<PathBuf>,
    /// `--format tf-train` for a parameter-server cluster of these ps tasks (`host:port,...`, as
    /// `tf-train --ps-hosts` takes them): the tables go round-robin on the ps tasks.
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    pub ps_hosts: Option<Vec<String>>,
    /// `--format tf-train` of a bag-of-words model with the linear learning-rate schedule: the
    /// instances the `tf-train` run will take (epochs times instances, every worker's together),
    /// over which the graph's rate decays as natively; without it the graph trains at the
    /// optimizer's rate throughout.
    #[arg(long, value_name = "INSTANCES")]
    pub lr_decay_instances: Option<u64>,
    /// Where to write: the vectors file (`--format word2vec`; `count dim` header, then
    /// `word v1 ... v_dim` per line, which gensim's `KeyedVectors.load_word2vec_format` reads;
    /// `-`: standard output), or the SavedModel directory, which must not exist or be empty.
    #[arg(long, short)]
    pub output: PathBuf,
}

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A word2vec model's vectors in word2vec's text format.
    Word2vec,
    /// A TensorFlow SavedModel directory with a `serving_default` signature.
    SavedModel,
    /// A training graph for `hogwild tf-train` (`DIR/graph.meta`) and a TensorFlow checkpoint
    /// of the weights and optimizer state (`DIR/ckpt`).
    TfTrain,
}

pub fn run(args: Args) -> Result<()> {
    let (config, model) = crate::models::load(&args.model)?;
    let word2vec = matches!(model, AnyModel::Word2vecSgd(_));
    let format = args.format.unwrap_or(if word2vec {
        Format::Word2vec
    } else {
        Format::SavedModel
    });
    match format {
        Format::Word2vec => {
            let AnyModel::Word2vecSgd(m) = &model else {
                bail!(
                    "{}: only word2vec models have word vectors to export (--format word2vec); \
                     --format saved-model exports any model",
                    args.model.display()
                );
            };
            paths::refuse_overwrite(&args.output, "the output", [args.model.as_path()])?;
            let to_stdout = paths::is_stdio(&args.output);
            let mut out = paths::output(&args.output, to_stdout)?;
            let n = m.write_text(&mut out)?;
            let name = out.name().to_string();
            out.commit()?;
            say!(
                to_stdout,
                "wrote {n} vectors of {} to {name}",
                m.config().dim
            );
            Ok(())
        }
        Format::SavedModel | Format::TfTrain => saved_model(&args, &config, &model, format),
    }
}

#[cfg(not(feature = "tf"))]
fn saved_model(
    _args: &Args,
    _config: &hogwild::models::ModelConfig,
    _model: &AnyModel,
    _format: Format,
) -> Result<()> {
    bail!(
        "--format saved-model and tf-train need TensorFlow: this hogwild was built without it \
         (build with --features tf after scripts/setup.sh)"
    )
}

#[cfg(feature = "tf")]
fn saved_model(
    args: &Args,
    config: &hogwild::models::ModelConfig,
    model: &AnyModel,
    format: Format,
) -> Result<()> {
    use anyhow::Context;
    use hogwild::models::ModelKind;
    use hogwild::{DataFeedDesc, Model};
    use hogwild_tf::export::{self, BowParts, CtrParts, Exportable, Word2VecParts};

    if paths::is_stdio(&args.output) {
        bail!("-o: the export is a directory: give its path, not -");
    }
    export::check_target(&args.output)?;
    let desc = match &args.feed {
        Some(path) => Some(DataFeedDesc::from_file(path)?),
        None => None,
    };
    if let (Some(desc), Some(path)) = (&desc, &args.feed) {
        config
            .check_desc(desc, false)
            .with_context(|| format!("--feed {}", path.display()))?;
    }
    let ctr_desc = || -> Result<&DataFeedDesc> {
        desc.as_ref().with_context(|| {
            format!(
                "{}: a CTR model's export needs its DataFeedDesc (--feed data.prototxt): the \
                 slots it reads are the model's inputs",
                args.model.display()
            )
        })
    };
    macro_rules! bow {
        ($m:expr) => {
            Exportable::Bow(BowParts {
                config: $m.config(),
                embedding: $m.embedding(),
                output: $m.output(),
                labels: $m.labels(),
                label_counts: $m.label_counts(),
            })
        };
    }
    macro_rules! ctr {
        ($m:expr) => {{
            let tables = $m.tables();
            let bias = tables[tables.len() - 1];
            Exportable::Ctr(CtrParts {
                kind: $m.kind(),
                config: $m.config(),
                tables: $m.feature_tables(),
                bias,
                desc: ctr_desc()?,
            })
        }};
    }
    let exportable = match model {
        AnyModel::BowSgd(m) => bow!(m),
        AnyModel::BowAdagrad(m) => bow!(m),
        AnyModel::BowAdam(m) => bow!(m),
        AnyModel::CtrSgd(m) => ctr!(m),
        AnyModel::CtrAdagrad(m) => ctr!(m),
        AnyModel::CtrAdam(m) => ctr!(m),
        AnyModel::Word2vecSgd(m) => Exportable::Word2Vec(Word2VecParts { model: m }),
    };
    if format == Format::TfTrain {
        let tables = hogwild::with_model!(model, m => m.tables());
        let target = export::TrainTarget {
            op_libraries: args.op_libraries.clone(),
            ps_tasks: args.ps_hosts.as_ref().map_or(0, Vec::len),
            lr_decay_instances: args.lr_decay_instances,
        };
        export::tf_train_graph(
            &exportable,
            &tables,
            &config.optimizer,
            &target,
            &args.output,
        )?;
        println!(
            "wrote the training graph {} and its checkpoint {} (hogwild tf-train --graph ... \
             --restore ...)",
            args.output.join(export::GRAPH_FILE).display(),
            args.output.join(export::CHECKPOINT_PREFIX).display()
        );
        return Ok(());
    }
    export::saved_model(&exportable, &args.output)?;
    let kind = match &config.model {
        ModelKind::Bow(_) => "bag-of-words",
        ModelKind::Word2vec(_) => "word2vec",
        ModelKind::Lr(_) => "logistic regression",
        ModelKind::Fm(_) => "factorization machine",
        ModelKind::Ffm(_) => "field-aware factorization machine",
    };
    println!(
        "wrote the {kind} model as a SavedModel to {} (signature {})",
        args.output.display(),
        export::SERVING_SIGNATURE
    );
    Ok(())
}
