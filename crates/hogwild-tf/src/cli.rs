//! `hogwild tf-train`: trains a TensorFlow graph from files, Hogwild-style.

use std::path::PathBuf;

use hogwild::executor::{EpochReport, Progress, Run, RunOptions, RunReport};
use hogwild::feed::{DataFeedDesc, FeedMode, FeedOptions};

use crate::cluster::{Cluster, ClusterArgs};
use crate::graph::SessionConfig;
use crate::model::TfModel;
use crate::{Error, Result};

/// Options of `hogwild tf-train`.
#[derive(Debug, Clone, clap::Args)]
pub struct TfTrainArgs {
    /// The graph to train: a MetaGraphDef file (binary) or a SavedModel directory (TF1
    /// SavedModelBuilder or TF2 tf.saved_model.save) with a "train" signature whose inputs are
    /// named by slot (guide: docs/runner.md; the rules: docs/runner-contract.md).
    #[arg(long)]
    pub graph: PathBuf,
    /// The tag set of the SavedModel's MetaGraph to train (repeatable; default: its only
    /// MetaGraph, or of several the one tagged "train").
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// An op library to load before importing the graph (repeatable), e.g.
    /// build/plugin/libadam_async_ops.so for graphs trained with AdamAsync.
    #[arg(long = "op-library")]
    pub op_libraries: Vec<PathBuf>,
    /// The data feed description (protobuf text format, Paddle's data.prototxt).
    #[arg(long = "feed", alias = "data-desc", value_name = "DATA_PROTOTXT")]
    pub data_desc: PathBuf,
    /// Training files in the MultiSlot text format.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Worker threads, each calling Session::run on the shared session.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Passes over the training files.
    #[arg(long, default_value_t = 1)]
    pub epochs: usize,
    /// Overrides the description's batch_size.
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Print the step, instances/s and the fetched values every this many batches (0: never).
    #[arg(long, default_value_t = 100)]
    pub print_period: usize,
    /// Start from this checkpoint (a saver prefix) instead of running the init op (in a
    /// cluster: the chief only).
    #[arg(long)]
    pub restore: Option<PathBuf>,
    /// After training, save where Python reads the variables back: for a MetaGraphDef, a
    /// checkpoint at this prefix (tf.compat.v1.train.Saver.restore); for a SavedModel, a new
    /// SavedModel directory (tf.saved_model.load or tf.compat.v1.saved_model.load), replacing an
    /// existing one only once complete (in a cluster: the chief only, once every worker has
    /// finished).
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// After training, evaluate on these files (repeatable) and print the averaged values.
    #[arg(long = "eval")]
    pub eval_files: Vec<PathBuf>,
    /// Run each step's ops in the worker thread itself instead of TensorFlow's inter-op pool
    /// (faster for small graphs; a failing op is then reported without its node name).
    #[arg(long)]
    pub inline_steps: bool,
    /// Training as a worker of a parameter-server cluster (`--ps-hosts`, `--worker-hosts`,
    /// `--task-index`); all empty for a local run.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// What `tf-train` did.
#[derive(Debug, Clone)]
pub struct TfTrainReport {
    /// The training run over every epoch: batches, instances, time and the averaged fetched
    /// values.
    pub train: RunReport,
    /// The evaluation of `--eval`'s files after training (and saving); `None` without `--eval`.
    pub eval: Option<RunReport>,
}

/// One line: `<what>: batches B  instances N  elapsed S s  R instances/s  <name> <value> ...`.
pub fn summary_line(what: &str, r: &RunReport) -> String {
    let mut line = format!(
        "{what}: batches {}  instances {}  elapsed {:.3} s  {:.0} instances/s",
        r.batches,
        r.instances,
        r.elapsed.as_secs_f64(),
        r.instances_per_sec()
    );
    for (name, value) in &r.fetched {
        line.push_str(&format!("  {name} {value:.8}"));
    }
    line
}

/// Runs `tf-train`: loads the graph, initialises or restores it, trains, saves, evaluates, and
/// prints one summary line per pass to stdout.
/// In a cluster ([`ClusterArgs`]), the worker reaches the ps tasks and waits for the chief's
/// initialisation, or, as the chief (task 0), initialises the variables and after training waits
/// for every worker to finish before it saves and evaluates (docs/parameter-servers.md).
///
/// # Errors
///
/// Options that do not fit together or a graph that does not fit them ([`Error::BadOption`],
/// [`Error::BadGraph`]) are reported before any training; then whatever loading, a batch, a step,
/// saving or the cluster fails with (every variant of [`Error`]).
pub fn tf_train(args: &TfTrainArgs) -> Result<TfTrainReport> {
    let cluster = Cluster::from_args(&args.cluster)?;
    if let Some(cluster) = &cluster {
        check_cluster_options(args, cluster)?;
    }
    let desc = DataFeedDesc::from_file(&args.data_desc)?;
    // Said once, as `hogwild train` says it: the fields a Paddle desc sets that are not honoured.
    for field in desc.ignored_fields() {
        eprintln!(
            "warning: data feed desc {}: {field}",
            args.data_desc.display()
        );
    }
    let mut config = SessionConfig {
        inter_op_threads: args.threads.max(1),
        intra_op_threads: 1,
        run_in_caller: args.inline_steps,
        tags: args.tags.clone(),
        ..SessionConfig::default()
    };
    // Started before the session is created, which then finds its in-process master; lives as
    // long as the session.
    let _server = match &cluster {
        Some(cluster) => cluster.join(&mut config)?,
        None => None,
    };
    let mut model = TfModel::load(&args.graph, &args.op_libraries, &config)?;
    let graph = model.graph();
    if cluster.is_none() {
        graph.check_can(
            !args.eval_files.is_empty(),
            args.restore.is_some(),
            args.save.as_deref(),
        )?;
    }
    match &cluster {
        Some(cluster) => {
            if !graph.is_cluster_graph() {
                return Err(Error::BadGraph {
                    path: args.graph.clone(),
                    reason:
                        "not exported for a parameter-server cluster (no \"hogwild/finish_op\" \
                             collection): export it with --ps-hosts"
                            .into(),
                });
            }
            cluster.reach(&config)?;
            cluster.start(graph, args.restore.as_deref())?;
        }
        None if graph.is_cluster_graph() => {
            return Err(Error::BadGraph {
                path: args.graph.clone(),
                reason: "exported for a parameter-server cluster (its variables live on /job:ps \
                         tasks): train it as a worker of that cluster with --ps-hosts, \
                         --worker-hosts and --task-index"
                    .into(),
            });
        }
        None => match &args.restore {
            Some(prefix) => graph.restore(prefix)?,
            None => graph.init()?,
        },
    }
    let options = RunOptions {
        print_period: args.print_period,
        progress: Progress::Lines,
        debug: false,
        feed: FeedOptions {
            epochs: args.epochs,
            batch_size: args.batch_size,
            mode: FeedMode::Stream,
            ..FeedOptions::default()
        },
        ..RunOptions::default()
    };
    // The same epoch lines as `hogwild train`, from the same worker loop.
    let hook = |e: &EpochReport| {
        println!("{}", e.line(args.threads));
        Ok(())
    };
    let train = Run::new(&model, &desc)
        .threads(args.threads)
        .options(&options)
        .on_epoch(&hook)
        .train(&args.files)?;
    println!("{}", summary_line("train", &train));
    let unfinished = match &cluster {
        Some(cluster) => cluster.finish(model.graph())?,
        None => None,
    };
    if let Some(prefix) = &args.save {
        model.graph().save(prefix)?;
        let what = if model.graph().is_saved_model() {
            "SavedModel"
        } else {
            "checkpoint"
        };
        println!("saved {what} {}", prefix.display());
    }
    let eval = if args.eval_files.is_empty() {
        None
    } else {
        let quiet = RunOptions {
            print_period: 0,
            ..options.clone()
        };
        let r = Run::new(&model, &desc)
            .threads(args.threads)
            .options(&quiet)
            .eval(&args.eval_files)?;
        println!("{}", summary_line("eval", &r));
        Some(r)
    };
    if cluster.is_some() {
        model.close()?;
    }
    match unfinished {
        Some(error) => Err(error),
        None => Ok(TfTrainReport { train, eval }),
    }
}

/// The options a worker of a cluster cannot take, refused before it starts.
fn check_cluster_options(args: &TfTrainArgs, cluster: &Cluster) -> Result<()> {
    let refuse = |option: &'static str, reason: &str| {
        Err(Error::BadOption {
            option,
            reason: format!("{}: {reason}", cluster.describe()),
        })
    };
    if !cluster.is_chief() && args.save.is_some() {
        return refuse("--save", "only the chief (worker task 0) saves");
    }
    if !cluster.is_chief() && args.restore.is_some() {
        return refuse("--restore", "only the chief (worker task 0) restores");
    }
    if args.inline_steps {
        return refuse(
            "--inline-steps",
            "a local session's option; in a cluster the master's executors run the steps",
        );
    }
    Ok(())
}
