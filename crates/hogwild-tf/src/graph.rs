//! A training graph: the MetaGraphDef or SavedModel exported by Python, loaded into one
//! TensorFlow session that every worker thread shares (docs/runner-contract.md).
//!
//! TensorFlow sessions are thread-safe: several threads may call `Session::run` at once, and the
//! variables (resource variables in the session's resource manager) are shared by all of them. The
//! optimizer ops of the exported graph use no locks (`use_locking=False`), so concurrent train
//! steps update the parameters Hogwild-style. Kernels run single-threaded and the inter-op pool
//! has one thread per worker: the worker threads are the only parallelism.
//!
//! A graph exported for a parameter-server cluster keeps its variables on the ps tasks and is
//! run through a session on a cluster's master ([`SessionConfig::target`]); it has a few more
//! collections, for the chief's and the other workers' protocol ([`crate::cluster`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use prost::Message;
use tensorflow::{
    Graph, ImportGraphDefOptions, Library, Operation, SavedModelBundle, Session, SessionOptions,
    SessionRunArgs, Status, Tensor,
};

use crate::proto::{self, MetaGraphDef, SavedModel, TensorInfo};
use crate::{Error, Result};

/// The signature the runner reads: inputs keyed by data-feed slot, outputs keyed by metric name.
pub const SIGNATURE: &str = "train";
/// The collection holding the initialisation op.
pub const INIT_COLLECTION: &str = "init_op";
/// The collection holding the training op.
pub const TRAIN_COLLECTION: &str = "train_op";
/// The collection holding the tensor of the names of uninitialised variables (TensorFlow's
/// `ready_op`, `report_uninitialized_variables`); a cluster graph has it.
pub const READY_COLLECTION: &str = "ready_op";
/// The collection holding the op that counts one worker as finished; a cluster graph has it.
pub const FINISH_COLLECTION: &str = "hogwild/finish_op";
/// The collection holding the tensor of the number of finished workers.
pub const FINISHED_COLLECTION: &str = "hogwild/finished_workers";
/// The collection holding the initialiser of that counter, which checkpoints leave out.
pub const FINISHED_INIT_COLLECTION: &str = "hogwild/finished_workers_init";
/// The suffix of an input key that marks a slot fed as values plus row offsets.
pub const ROW_SPLITS_SUFFIX: &str = "/row_splits";

/// One output of an op.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    pub(crate) name: String,
    pub(crate) op: Operation,
    pub(crate) index: i32,
}

/// A graph input from the signature.
#[derive(Clone, Debug)]
pub(crate) struct Input {
    pub(crate) key: String,
    pub(crate) tensor: Endpoint,
    pub(crate) dtype: i32,
    /// `None` when the rank is unknown.
    pub(crate) rank: Option<usize>,
}

/// The saver's filename tensor, save tensor and restore op.
struct Saver {
    filename: Endpoint,
    save: Endpoint,
    restore: Operation,
}

/// The ops of a graph exported for a parameter-server cluster.
struct ClusterOps {
    ready: Endpoint,
    finish: Operation,
    finished: Endpoint,
    finished_init: Operation,
}

/// Session configuration.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Threads of TensorFlow's inter-op pool, which runs the ops of every step (set it to the
    /// number of worker threads).
    pub inter_op_threads: usize,
    /// Threads each kernel may use (1: the worker threads are the only parallelism).
    pub intra_op_threads: usize,
    /// Run each step's ops in the thread that calls `Session::run` instead of the inter-op pool.
    /// Saves a context switch per op, but TensorFlow then reports a failing kernel's error
    /// without the name of its node, so it is off by default.
    pub run_in_caller: bool,
    /// The master to connect to (`grpc://host:port`); `None`: a local, in-process session.
    pub target: Option<String>,
    /// The only devices the session sees (e.g. `/job:ps`, `/job:worker/task:1`); empty: all.
    pub device_filters: Vec<String>,
    /// The deadline of each blocking call of the session, creating it included; `None`: none.
    pub operation_timeout: Option<Duration>,
    /// The tag set of the MetaGraph to load from a SavedModel; empty: its only MetaGraph, or of
    /// several the one tagged `train`.
    pub tags: Vec<String>,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            inter_op_threads: 1,
            intra_op_threads: 1,
            run_in_caller: false,
            target: None,
            device_filters: Vec::new(),
            operation_timeout: None,
            tags: Vec::new(),
        }
    }
}

/// The tag of the MetaGraph chosen among several when no tag is given
/// (`tf.saved_model.TRAINING`).
pub const TRAIN_TAG: &str = "train";
/// The collection where `SavedModelBuilder.add_meta_graph_and_variables(train_op=...)` puts its
/// train op.
pub const SAVED_MODEL_TRAIN_COLLECTION: &str = "saved_model_train_op";
/// The signature run by `--eval` when the graph has it.
pub const EVAL_SIGNATURE: &str = "eval";

/// What `--graph` named.
#[derive(Debug, Clone)]
enum Kind {
    /// A MetaGraphDef file: variables from the init op, saved as checkpoints.
    MetaGraph,
    /// A SavedModel directory: variables from the SavedModel, saved as a new SavedModel.
    SavedModel {
        /// TF2 (`tf.saved_model.save`, with an object graph): the train signature is the step.
        tf2: bool,
    },
}

/// A signature's inputs (sorted by key) and outputs (`loss` first, then by key).
#[derive(Debug)]
pub(crate) struct Signature {
    pub(crate) inputs: Vec<Input>,
    outputs: Vec<Endpoint>,
}

/// A training graph in a live session.
pub struct TrainGraph {
    path: PathBuf,
    kind: Kind,
    session: Session,
    train_signature: Signature,
    eval_signature: Option<Signature>,
    init: Option<Operation>,
    train: Vec<Operation>,
    saver: Option<Saver>,
    cluster: Option<ClusterOps>,
    target: Option<String>,
    run_options: Vec<u8>,
    // Declared last: dropped after the session that runs their kernels.
    _libraries: Vec<Library>,
    _graph: Graph,
}

impl std::fmt::Debug for TrainGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrainGraph")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("inputs", &self.input_keys())
            .field("outputs", &self.output_names())
            .finish_non_exhaustive()
    }
}

pub(crate) fn run_error(during: impl Into<String>, status: Status) -> Error {
    Error::Run {
        during: during.into(),
        message: status.to_string(),
    }
}

/// Splits `"op:1"` into `("op", 1)`; a name without `:` is output 0.
fn parse_tensor_name(name: &str) -> Option<(&str, i32)> {
    match name.rsplit_once(':') {
        Some((op, index)) => Some((op, index.parse().ok()?)),
        None => Some((name, 0)),
    }
}

/// The file of a SavedModel directory that holds its MetaGraphs.
const SAVED_MODEL_PB: &str = "saved_model.pb";

/// Reads `--graph`: a MetaGraphDef file, or a SavedModel directory whose MetaGraph is chosen by
/// `tags`.
fn read_graph(path: &Path, tags: &[String]) -> Result<(MetaGraphDef, Kind)> {
    let bad = |reason: String| Error::BadGraph {
        path: path.into(),
        reason,
    };
    let read = |file: &Path| {
        std::fs::read(file).map_err(|source| Error::Io {
            path: file.into(),
            source,
        })
    };
    if path.is_dir() {
        let pb = path.join(SAVED_MODEL_PB);
        if !pb.is_file() {
            return Err(bad(format!(
                "a directory without {SAVED_MODEL_PB}; --graph takes a MetaGraphDef file or a \
                 SavedModel directory"
            )));
        }
        let saved = SavedModel::decode(read(&pb)?.as_slice()).map_err(|e| Error::BadGraph {
            path: pb.clone(),
            reason: format!("not a binary SavedModel: {e}"),
        })?;
        let meta = choose_meta_graph(saved.meta_graphs, tags).map_err(bad)?;
        let tf2 = meta.object_graph_def.is_some();
        return Ok((meta, Kind::SavedModel { tf2 }));
    }
    let bytes = read(path)?;
    let named_pb = path.file_name().is_some_and(|n| n == SAVED_MODEL_PB);
    // A MetaGraphDef's field 1 is a message and a SavedModel's an integer, so a MetaGraphDef
    // never decodes as a SavedModel with a schema version and MetaGraphs holding graphs.
    let is_saved_model = SavedModel::decode(bytes.as_slice()).is_ok_and(|s| {
        s.saved_model_schema_version > 0
            && !s.meta_graphs.is_empty()
            && s.meta_graphs.iter().all(|m| !m.graph_def.is_empty())
    });
    if named_pb || is_saved_model {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.display().to_string(),
            _ => ".".into(),
        };
        return Err(bad(format!(
            "the {SAVED_MODEL_PB} of a SavedModel; pass the SavedModel's directory instead: \
             --graph {dir}"
        )));
    }
    let meta = MetaGraphDef::decode(bytes.as_slice())
        .map_err(|e| bad(format!("not a binary MetaGraphDef: {e}")))?;
    if meta.graph_def.is_empty() {
        return Err(bad("the MetaGraphDef holds no graph_def".into()));
    }
    Ok((meta, Kind::MetaGraph))
}

/// The MetaGraph of a SavedModel tagged exactly `tags`; with no tags, the only one, or the one
/// tagged `train`.
fn choose_meta_graph(
    metas: Vec<MetaGraphDef>,
    tags: &[String],
) -> std::result::Result<MetaGraphDef, String> {
    let tags_of = |m: &MetaGraphDef| {
        let mut t = m
            .meta_info_def
            .as_ref()
            .map(|i| i.tags.clone())
            .unwrap_or_default();
        t.sort();
        t
    };
    let sets = || {
        metas
            .iter()
            .map(|m| format!("[{}]", tags_of(m).join(", ")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut wanted: Vec<String> = tags.to_vec();
    wanted.sort();
    wanted.dedup();
    let found = if !wanted.is_empty() {
        metas.iter().position(|m| tags_of(m) == wanted)
    } else if metas.len() == 1 {
        Some(0)
    } else {
        let train: Vec<usize> = (0..metas.len())
            .filter(|&i| tags_of(&metas[i]).iter().any(|t| t == TRAIN_TAG))
            .collect();
        match train.as_slice() {
            [one] => Some(*one),
            _ => {
                return Err(format!(
                    "the SavedModel has MetaGraphs tagged {}; choose one with --tag",
                    sets()
                ))
            }
        }
    };
    match found {
        Some(i) => Ok(metas.into_iter().nth(i).unwrap_or_default()),
        None => Err(format!(
            "the SavedModel has no MetaGraph tagged [{}]; its tag sets: {}",
            wanted.join(", "),
            sets()
        )),
    }
}

fn import_error(path: &Path, status: Status) -> Error {
    let message = status.to_string();
    let hint = if message.contains("Op type not registered") {
        " (load the op library that defines it with --op-library)"
    } else {
        ""
    };
    Error::Import {
        path: path.into(),
        message,
        hint,
    }
}

/// The `VarHandleOp`s among `op`'s inputs: the variables a function call captures.
fn captured_variables(op: &Operation) -> Vec<String> {
    (0..op.num_inputs())
        .map(|i| op.input(i).0)
        .filter(|input| input.op_type().is_ok_and(|t| t == "VarHandleOp"))
        .filter_map(|input| input.name().ok())
        .collect()
}

impl TrainGraph {
    /// Loads the op libraries, then the graph at `path` (a MetaGraphDef file or a SavedModel
    /// directory, see docs/runner-contract.md) and creates its session. The variables of a
    /// MetaGraphDef are not initialised yet: call [`TrainGraph::init`] or
    /// [`TrainGraph::restore`]; a SavedModel's are restored from it.
    pub fn load(path: &Path, op_libraries: &[PathBuf], config: &SessionConfig) -> Result<Self> {
        let libraries = op_libraries
            .iter()
            .map(|lib| load_library(lib))
            .collect::<Result<Vec<_>>>()?;
        let (meta, kind) = read_graph(path, &config.tags)?;
        let bad = |reason: String| Error::BadGraph {
            path: path.into(),
            reason,
        };

        let mut options = SessionOptions::new();
        let config_proto = proto::ConfigProto {
            intra_op_parallelism_threads: config.intra_op_threads as i32,
            inter_op_parallelism_threads: config.inter_op_threads as i32,
            device_filters: config.device_filters.clone(),
            operation_timeout_in_ms: config
                .operation_timeout
                .map_or(0, |t| t.as_millis().clamp(1, i64::MAX as u128) as i64),
            rpc_options: None,
        };
        options
            .set_config(&config_proto.encode_to_vec())
            .map_err(|s| run_error("configuring the session", s))?;
        if let Some(target) = &config.target {
            options.set_target(target).map_err(|_| Error::BadOption {
                option: "--target",
                reason: format!("\"{target}\" contains a NUL byte"),
            })?;
        }
        let mut graph = Graph::new();
        let session = match kind {
            Kind::MetaGraph => {
                graph
                    .import_graph_def(&meta.graph_def, &ImportGraphDefOptions::new())
                    .map_err(|status| import_error(path, status))?;
                Session::new(&options, &graph).map_err(|s| {
                    run_error(format!("creating a session for {}", path.display()), s)
                })?
            }
            Kind::SavedModel { .. } => {
                // TensorFlow's own loader (TF Serving's): imports the chosen MetaGraph, restores
                // the variables through its saver_def and runs its main op.
                let tags = meta
                    .meta_info_def
                    .as_ref()
                    .map(|i| i.tags.clone())
                    .unwrap_or_default();
                SavedModelBundle::load(&options, &tags, &mut graph, path)
                    .map_err(|status| import_error(path, status))?
                    .session
            }
        };

        let op = |role: &str, op_name: &str| -> Result<Operation> {
            graph
                .operation_by_name(op_name)
                .ok()
                .flatten()
                .ok_or_else(|| bad(format!("{role}: no op \"{op_name}\" in the graph")))
        };
        let endpoint = |role: &str, name: &str| -> Result<Endpoint> {
            let (op_name, index) = parse_tensor_name(name)
                .ok_or_else(|| bad(format!("{role}: bad tensor name \"{name}\"")))?;
            let op = op(role, op_name)?;
            if index < 0 || index >= op.num_outputs() as i32 {
                return Err(bad(format!(
                    "{role}: op \"{op_name}\" has {} outputs, no output {index}",
                    op.num_outputs()
                )));
            }
            Ok(Endpoint {
                name: name.into(),
                op,
                index,
            })
        };
        let collection = |key: &str| -> Vec<String> {
            meta.collection_def
                .get(key)
                .and_then(|c| c.node_list.as_ref())
                .map(|l| l.value.clone())
                .unwrap_or_default()
        };
        let collection_name = |key: &str| collection(key).into_iter().next();
        let collection_op = |key: &str| -> Result<Operation> {
            let name = collection_name(key)
                .ok_or_else(|| bad(format!("no \"{key}\" collection naming an op")))?;
            op(
                &format!("collection \"{key}\""),
                name.split(':').next().unwrap_or(&name),
            )
        };
        let collection_tensor = |key: &str| -> Result<Endpoint> {
            let name = collection_name(key)
                .ok_or_else(|| bad(format!("no \"{key}\" collection naming a tensor")))?;
            endpoint(&format!("collection \"{key}\""), &name)
        };
        let signature = |name: &str| -> Result<Option<Signature>> {
            let Some(def) = meta.signature_def.get(name) else {
                return Ok(None);
            };
            let mut inputs = Vec::new();
            for (key, info) in &def.inputs {
                for (key, info) in signature_inputs(key, info).map_err(&bad)? {
                    inputs.push(Input {
                        tensor: endpoint(&format!("input \"{key}\""), &info.name)?,
                        dtype: info.dtype,
                        rank: rank(&info),
                        key,
                    });
                }
            }
            inputs.sort_by(|a, b| a.key.cmp(&b.key));
            let mut outputs = def
                .outputs
                .iter()
                .map(|(key, info)| {
                    check_output(key, info).map_err(&bad)?;
                    let mut e = endpoint(&format!("output \"{key}\""), &info.name)?;
                    e.name = key.clone();
                    Ok(e)
                })
                .collect::<Result<Vec<_>>>()?;
            if outputs.is_empty() {
                return Err(bad(format!("signature_def \"{name}\" has no outputs")));
            }
            // Loss first, then the others by name: the order metrics are printed in.
            outputs.sort_by(|a, b| (a.name != "loss", &a.name).cmp(&(b.name != "loss", &b.name)));
            Ok(Some(Signature { inputs, outputs }))
        };
        let train_signature = signature(SIGNATURE)?.ok_or_else(|| {
            let mut have: Vec<&String> = meta.signature_def.keys().collect();
            have.sort();
            bad(format!(
                "no signature_def \"{SIGNATURE}\" (its signatures: {}); see \
                 docs/runner-contract.md",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.iter()
                        .map(|k| format!("\"{k}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ))
        })?;
        let eval_signature = signature(EVAL_SIGNATURE)?;
        if let Some(eval) = &eval_signature {
            let names = |s: &Signature| s.outputs.iter().map(|o| o.name.clone()).collect();
            let (t, e): (Vec<String>, Vec<String>) = (names(&train_signature), names(eval));
            if t != e {
                return Err(bad(format!(
                    "signature_def \"{EVAL_SIGNATURE}\" has outputs {e:?}, \"{SIGNATURE}\" \
                     {t:?}; they must have the same keys"
                )));
            }
        }

        let tf2 = matches!(kind, Kind::SavedModel { tf2: true });
        // Every op of the train-op collections, run together in each step as `tf.group` would
        // run them: a model with one optimizer per part (wide and deep) has one op per part.
        let mut train = Vec::new();
        if !tf2 {
            let mut names: Vec<String> = Vec::new();
            for key in [TRAIN_COLLECTION, SAVED_MODEL_TRAIN_COLLECTION] {
                for name in collection(key) {
                    let op_name = name.split(':').next().unwrap_or(&name).to_string();
                    if !names.contains(&op_name) {
                        train.push(op(&format!("collection \"{key}\""), &op_name)?);
                        names.push(op_name);
                    }
                }
            }
            if train.is_empty() {
                return Err(bad(format!(
                    "no train op: the \"{TRAIN_COLLECTION}\" collection is missing or empty \
                     (optimizer.minimize() adds its op there; SavedModelBuilder takes it as \
                     train_op=)"
                )));
            }
        }
        let init = match (&kind, collection_name(INIT_COLLECTION)) {
            (Kind::MetaGraph, Some(_)) => Some(collection_op(INIT_COLLECTION)?),
            _ => None,
        };
        let saver = match &meta.saver_def {
            None => None,
            Some(saver_def) => Some(Saver {
                filename: endpoint("saver filename tensor", &saver_def.filename_tensor_name)?,
                save: endpoint("saver save tensor", &saver_def.save_tensor_name)?,
                restore: op("saver restore op", &saver_def.restore_op_name)?,
            }),
        };
        if tf2 {
            if let Some(saver) = &saver {
                // The train function must update the variables the saver restores and saves: a
                // Keras 3 object tracked as such is exported with copies of its variables, which
                // the loader restores while the function reads the uninitialised originals.
                let restored = captured_variables(&saver.restore);
                let mut missing: Vec<String> = Vec::new();
                for output in &train_signature.outputs {
                    for v in captured_variables(&output.op) {
                        if !restored.contains(&v) && !missing.contains(&v) {
                            missing.push(v);
                        }
                    }
                }
                if !missing.is_empty() {
                    return Err(bad(format!(
                        "signature \"{SIGNATURE}\" uses variables that the SavedModel does not \
                         save or restore: {}; Keras 3 models and optimizers are saved with \
                         copies of their variables: track the backing tf.Variables \
                         ([v.value for v in model.variables + optimizer.variables]) on the \
                         exported tf.Module instead of the Keras objects",
                        missing.join(", ")
                    )));
                }
            }
        }
        let cluster = match collection_name(FINISH_COLLECTION) {
            None => None,
            Some(_) => Some(ClusterOps {
                ready: collection_tensor(READY_COLLECTION)?,
                finish: collection_op(FINISH_COLLECTION)?,
                finished: collection_tensor(FINISHED_COLLECTION)?,
                finished_init: collection_op(FINISHED_INIT_COLLECTION)?,
            }),
        };
        let run_options = if config.run_in_caller {
            proto::RunOptions {
                inter_op_thread_pool: -1,
            }
            .encode_to_vec()
        } else {
            Vec::new()
        };
        Ok(TrainGraph {
            path: path.into(),
            kind,
            session,
            train_signature,
            eval_signature,
            init,
            train,
            saver,
            cluster,
            target: config.target.clone(),
            run_options,
            _libraries: libraries,
            _graph: graph,
        })
    }

    /// The file the graph came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `--graph` was a SavedModel directory (its variables came from it, and
    /// [`TrainGraph::save`] writes a new SavedModel).
    pub fn is_saved_model(&self) -> bool {
        matches!(self.kind, Kind::SavedModel { .. })
    }

    /// The `train` signature's input keys, sorted (a ragged input as `<key>` and
    /// `<key>/row_splits`).
    pub fn input_keys(&self) -> Vec<&str> {
        self.train_signature
            .inputs
            .iter()
            .map(|i| i.key.as_str())
            .collect()
    }

    /// The fetched values' names: `loss` first, then the others by name.
    pub fn output_names(&self) -> Vec<&str> {
        self.train_signature
            .outputs
            .iter()
            .map(|o| o.name.as_str())
            .collect()
    }

    /// The names of the ops each training step runs (the train-op collections; none for a TF2
    /// SavedModel, whose `train` signature is the step).
    pub fn train_op_names(&self) -> Vec<String> {
        self.train
            .iter()
            .map(|op| op.name().unwrap_or_default())
            .collect()
    }

    /// Whether the graph has an `eval` signature, which evaluation steps then run.
    pub fn has_eval_signature(&self) -> bool {
        self.eval_signature.is_some()
    }

    /// The signature a training (`train`) or evaluation step runs: evaluation runs the `eval`
    /// signature when the graph has one, else `train`'s outputs without the train ops.
    pub(crate) fn signature(&self, train: bool) -> Result<&Signature> {
        if train {
            return Ok(&self.train_signature);
        }
        match (&self.eval_signature, &self.kind) {
            (Some(eval), _) => Ok(eval),
            (None, Kind::SavedModel { tf2: true }) => Err(self.no_eval()),
            (None, _) => Ok(&self.train_signature),
        }
    }

    fn no_eval(&self) -> Error {
        Error::BadGraph {
            path: self.path.clone(),
            reason: format!(
                "cannot evaluate: a TF2 SavedModel's \"{SIGNATURE}\" signature updates the \
                 variables whenever it runs; export an \"{EVAL_SIGNATURE}\" signature (the same \
                 inputs and outputs, no update) for --eval"
            ),
        }
    }

    /// Checks, before any work, that the graph can do what `tf-train`'s options ask: evaluate,
    /// start (init op or `restore`), and save.
    pub fn check_can(&self, eval: bool, restore: bool, save: Option<&Path>) -> Result<()> {
        if eval {
            self.signature(false)?;
        }
        if !restore && matches!(self.kind, Kind::MetaGraph) && self.init.is_none() {
            return Err(self.no_init());
        }
        if (restore || save.is_some()) && self.saver.is_none() {
            return Err(self.no_saver());
        }
        if let (Some(out), Kind::SavedModel { .. }) = (save, &self.kind) {
            check_saved_model_target(out)?;
        }
        Ok(())
    }

    fn no_init(&self) -> Error {
        Error::BadGraph {
            path: self.path.clone(),
            reason: format!(
                "no \"{INIT_COLLECTION}\" collection naming the initialisation op; export it \
                 (tf.compat.v1.add_to_collection(\"{INIT_COLLECTION}\", \
                 tf.compat.v1.global_variables_initializer())) or start from a checkpoint with \
                 --restore"
            ),
        }
    }

    fn no_saver(&self) -> Error {
        Error::BadGraph {
            path: self.path.clone(),
            reason: "no saver_def, needed by --save and --restore (export the graph with a \
                     tf.compat.v1.train.Saver)"
                .into(),
        }
    }

    fn saver(&self) -> Result<&Saver> {
        self.saver.as_ref().ok_or_else(|| self.no_saver())
    }

    /// The master the session connects to; `None` for a local session.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// Whether the graph was exported for a parameter-server cluster: it has the
    /// `hogwild/finish_op` collection (loading then requires `ready_op`,
    /// `hogwild/finished_workers` and `hogwild/finished_workers_init` too), by which the chief
    /// and the other workers wait for each other ([`ClusterArgs`](crate::ClusterArgs),
    /// docs/parameter-servers.md).
    pub fn is_cluster_graph(&self) -> bool {
        self.cluster.is_some()
    }

    fn cluster_ops(&self, during: &str) -> Result<&ClusterOps> {
        self.cluster.as_ref().ok_or_else(|| Error::BadGraph {
            path: self.path.clone(),
            reason: format!(
                "{during}: the graph was not exported for a cluster (no \"{FINISH_COLLECTION}\" \
                 collection)"
            ),
        })
    }

    /// The names of the variables not initialised yet, from the `ready_op`; TensorFlow's status
    /// on failure (the first call into a cluster, which tells an unreachable one by its code).
    pub(crate) fn uninitialized_variables(&self) -> std::result::Result<Vec<String>, Status> {
        let Ok(ops) = self.cluster_ops("asking for uninitialised variables") else {
            return Err(Status::new_set_lossy(
                tensorflow::Code::FailedPrecondition,
                "the graph has no ready_op",
            ));
        };
        let mut args = SessionRunArgs::new();
        let token = args.request_fetch(&ops.ready.op, ops.ready.index);
        self.session.run(&mut args)?;
        let names: Tensor<String> = args.fetch(token)?;
        // Not `names.iter()` on an empty tensor: the crate then builds a slice from TensorFlow's
        // null data pointer (undefined behaviour, a panic in debug builds).
        if names.dims().contains(&0) {
            return Ok(Vec::new());
        }
        Ok(names.iter().cloned().collect())
    }

    /// Counts this worker as finished on the cluster's counter.
    pub(crate) fn count_finished(&self) -> Result<()> {
        let ops = self.cluster_ops("counting this worker finished")?;
        let mut args = SessionRunArgs::new();
        args.add_target(&ops.finish);
        self.session
            .run(&mut args)
            .map_err(|s| run_error("counting this worker finished", s))
    }

    /// The number of workers counted finished.
    pub(crate) fn finished_workers(&self) -> Result<i64> {
        let during = "asking the cluster how many workers finished";
        let ops = self.cluster_ops(during)?;
        let mut args = SessionRunArgs::new();
        let token = args.request_fetch(&ops.finished.op, ops.finished.index);
        self.session
            .run(&mut args)
            .map_err(|s| run_error(during, s))?;
        let count: Tensor<i64> = args.fetch(token).map_err(|s| run_error(during, s))?;
        count.first().copied().ok_or_else(|| Error::BadOutput {
            output: FINISHED_COLLECTION.into(),
            tensor: ops.finished.name.clone(),
            reason: "fetched an empty tensor".into(),
        })
    }

    /// Closes the session: a remote master then drops it at once instead of keeping it.
    pub fn close(&mut self) -> Result<()> {
        self.session
            .close()
            .map_err(|s| run_error("closing the session", s))
    }

    /// Runs the initialisation op once (the startup program); a SavedModel's variables were
    /// restored when it was loaded, so there it does nothing.
    pub fn init(&self) -> Result<()> {
        if self.is_saved_model() {
            return Ok(());
        }
        let init = self.init.as_ref().ok_or_else(|| self.no_init())?;
        let mut args = SessionRunArgs::new();
        args.add_target(init);
        self.session.run(&mut args).map_err(|s| {
            run_error(
                format!(
                    "running the init op \"{}\"",
                    init.name().unwrap_or_default()
                ),
                s,
            )
        })
    }

    /// Saves every variable where Python reads them back into this graph: for a MetaGraphDef,
    /// to the checkpoint `out` (files `out.index` and `out.data-*`) as `saver.save(sess, out)`
    /// does; for a SavedModel, to a new SavedModel directory `out` (the original's MetaGraphs
    /// and assets, the trained variables), built beside `out` and moved into place complete.
    pub fn save(&self, out: &Path) -> Result<()> {
        if self.is_saved_model() {
            return self.save_saved_model(out);
        }
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.into(),
                source,
            })?;
        }
        self.save_checkpoint(out, &format!("saving checkpoint {}", out.display()))
    }

    fn save_checkpoint(&self, prefix: &Path, during: &str) -> Result<()> {
        let saver = self.saver()?;
        let filename = Tensor::from(prefix.display().to_string());
        let mut args = SessionRunArgs::new();
        args.add_feed(&saver.filename.op, saver.filename.index, &filename);
        let token = args.request_fetch(&saver.save.op, saver.save.index);
        self.session
            .run(&mut args)
            .map_err(|s| run_error(during, s))?;
        args.fetch::<String>(token)
            .map_err(|s| run_error(during, s))?;
        Ok(())
    }

    fn save_saved_model(&self, out: &Path) -> Result<()> {
        check_saved_model_target(out)?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "saved_model".into());
        let pid = std::process::id();
        let fresh = parent.join(format!(".{name}.hogwild-new-{pid}"));
        let write = || -> Result<()> {
            let variables = fresh.join("variables");
            std::fs::create_dir_all(&variables).map_err(io(&variables))?;
            let pb = self.path.join(SAVED_MODEL_PB);
            std::fs::copy(&pb, fresh.join(SAVED_MODEL_PB)).map_err(io(&pb))?;
            // fingerprint.pb is left out: its checkpoint hash describes the old variables.
            for dir in ["assets", "assets.extra"] {
                let from = self.path.join(dir);
                if from.is_dir() {
                    copy_dir(&from, &fresh.join(dir))?;
                }
            }
            self.save_checkpoint(
                &variables.join("variables"),
                &format!("saving the variables of SavedModel {}", out.display()),
            )
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_dir_all(&fresh);
            return Err(e);
        }
        // The old `out` is moved aside only now that the new one is complete.
        let old = parent.join(format!(".{name}.hogwild-old-{pid}"));
        let had_old = out.exists();
        if had_old {
            std::fs::rename(out, &old).map_err(io(out))?;
        }
        if let Err(source) = std::fs::rename(&fresh, out) {
            if had_old {
                let _ = std::fs::rename(&old, out);
            }
            let _ = std::fs::remove_dir_all(&fresh);
            return Err(Error::Io {
                path: out.into(),
                source,
            });
        }
        if had_old {
            std::fs::remove_dir_all(&old).map_err(io(&old))?;
        }
        Ok(())
    }

    /// Restores every variable from the checkpoint `prefix` (in a cluster graph, also starts the
    /// finished workers' counter, which checkpoints leave out, at 0).
    pub fn restore(&self, prefix: &Path) -> Result<()> {
        let saver = self.saver()?;
        let filename = Tensor::from(prefix.display().to_string());
        let mut args = SessionRunArgs::new();
        args.add_feed(&saver.filename.op, saver.filename.index, &filename);
        args.add_target(&saver.restore);
        if let Some(ops) = &self.cluster {
            args.add_target(&ops.finished_init);
        }
        self.session
            .run(&mut args)
            .map_err(|s| run_error(format!("restoring checkpoint {}", prefix.display()), s))
    }

    /// Runs one step: feeds `feeds` (input position in the signature's inputs, tensor) to the
    /// `train` signature and runs every train op when `train`, or to the evaluation signature
    /// ([`TrainGraph::signature`]); returns every output's value in
    /// [`TrainGraph::output_names`] order. `during` names the step in errors.
    pub(crate) fn step(
        &self,
        feeds: &[(usize, crate::inputs::FeedTensor)],
        train: bool,
        during: &dyn Fn() -> String,
        out: &mut [f64],
    ) -> Result<()> {
        let signature = self.signature(train)?;
        let mut args = SessionRunArgs::new();
        if !self.run_options.is_empty() {
            args.set_run_options(&self.run_options);
        }
        for (input, tensor) in feeds {
            let t = &signature.inputs[*input].tensor;
            match tensor {
                crate::inputs::FeedTensor::I64(x) => args.add_feed(&t.op, t.index, x),
                crate::inputs::FeedTensor::I32(x) => args.add_feed(&t.op, t.index, x),
                crate::inputs::FeedTensor::F32(x) => args.add_feed(&t.op, t.index, x),
            }
        }
        if train {
            for op in &self.train {
                args.add_target(op);
            }
        }
        let tokens: Vec<_> = signature
            .outputs
            .iter()
            .map(|o| args.request_fetch(&o.op, o.index))
            .collect();
        self.session
            .run(&mut args)
            .map_err(|s| run_error(during(), s))?;
        for ((token, output), slot) in tokens
            .into_iter()
            .zip(&signature.outputs)
            .zip(out.iter_mut())
        {
            let value: Tensor<f32> = args
                .fetch(token)
                .map_err(|s| run_error(format!("{}: fetching \"{}\"", during(), output.name), s))?;
            if value.len() != 1 {
                return Err(Error::BadOutput {
                    output: output.name.clone(),
                    tensor: format!("{}:{}", output.op.name().unwrap_or_default(), output.index),
                    reason: format!(
                        "fetched a tensor of shape {:?}; fetched values must be scalars",
                        value.dims()
                    ),
                });
            }
            *slot = f64::from(value[0]);
        }
        Ok(())
    }
}

/// The inputs a signature's `key` stands for: itself, or a `tf.RaggedTensor`'s flat values
/// (`key`) and row splits (`key/row_splits`); anything else composite is refused.
fn signature_inputs(
    key: &str,
    info: &TensorInfo,
) -> std::result::Result<Vec<(String, TensorInfo)>, String> {
    let Some(composite) = &info.composite_tensor else {
        if info.name.is_empty() {
            return Err(format!(
                "input \"{key}\" is no dense tensor (a tf.SparseTensor?); the runner feeds \
                 dense tensors and tf.RaggedTensors (docs/runner-contract.md)"
            ));
        }
        return Ok(vec![(key.to_string(), info.clone())]);
    };
    let class = composite
        .type_spec
        .as_ref()
        .map(|t| t.type_spec_class_name.as_str())
        .unwrap_or_default();
    match (class, composite.components.as_slice()) {
        ("RaggedTensorSpec", [values, row_splits]) => Ok(vec![
            (key.to_string(), values.clone()),
            (format!("{key}{ROW_SPLITS_SUFFIX}"), row_splits.clone()),
        ]),
        ("RaggedTensorSpec", components) => Err(format!(
            "input \"{key}\" is a tf.RaggedTensor of ragged rank {}; a slot is fed as ragged \
             rank 1 (values and one row_splits)",
            components.len().saturating_sub(1)
        )),
        (class, _) => Err(format!(
            "input \"{key}\" is a composite tensor ({}); the runner feeds dense tensors and \
             tf.RaggedTensors (docs/runner-contract.md)",
            if class.is_empty() {
                "unknown kind"
            } else {
                class
            }
        )),
    }
}

/// Refuses, at load, an output that cannot be a printed value: not float32, or a known shape
/// of more than one element.
fn check_output(key: &str, info: &TensorInfo) -> std::result::Result<(), String> {
    if info.name.is_empty() {
        return Err(format!(
            "output \"{key}\" is a composite tensor; fetched values must be float32 scalars"
        ));
    }
    if info.dtype != proto::DT_FLOAT {
        return Err(format!(
            "output \"{key}\" ({}) is {}; fetched values must be float32 scalars",
            info.name,
            proto::dtype_name(info.dtype)
        ));
    }
    if let Some(shape) = info.tensor_shape.as_ref().filter(|s| !s.unknown_rank) {
        if shape.dim.iter().any(|d| d.size != 1) {
            let dims: Vec<String> = shape
                .dim
                .iter()
                .map(|d| match d.size {
                    -1 => "?".to_string(),
                    n => n.to_string(),
                })
                .collect();
            return Err(format!(
                "output \"{key}\" ({}) has shape [{}]; fetched values must be float32 scalars \
                 (reduce it, e.g. with tf.reduce_mean)",
                info.name,
                dims.join(", ")
            ));
        }
    }
    Ok(())
}

/// Refuses an existing `out` that `--save` of a SavedModel would replace but is no SavedModel
/// (nor an empty directory).
fn check_saved_model_target(out: &Path) -> Result<()> {
    let refuse = |reason: &str| Error::BadOption {
        option: "--save",
        reason: format!("{}: {reason}", out.display()),
    };
    if out.file_name().is_none() {
        return Err(refuse("names no directory to write the SavedModel to"));
    }
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        return Err(refuse(
            "exists and is no directory; the SavedModel is written as a directory",
        ));
    }
    let empty = std::fs::read_dir(out)
        .map_err(|source| Error::Io {
            path: out.into(),
            source,
        })?
        .next()
        .is_none();
    if !empty && !out.join(SAVED_MODEL_PB).is_file() {
        return Err(refuse(
            "exists and holds no SavedModel; it is replaced only when it is a SavedModel or \
             empty",
        ));
    }
    Ok(())
}

/// Copies the directory `from` to `to` with everything under it.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().map_err(io(&src))?.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).map_err(io(&src))?;
        }
    }
    Ok(())
}

fn rank(info: &TensorInfo) -> Option<usize> {
    info.tensor_shape
        .as_ref()
        .filter(|s| !s.unknown_rank)
        .map(|s| s.dim.len())
}

pub(crate) fn load_library(path: &Path) -> Result<Library> {
    let fail = |message: String| Error::OpLibrary {
        path: path.into(),
        message,
    };
    if !path.is_file() {
        return Err(fail("no such file".into()));
    }
    let name = path
        .to_str()
        .ok_or_else(|| fail("the path is not valid UTF-8".into()))?;
    Library::load(name).map_err(|s| fail(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{choose_meta_graph, parse_tensor_name};
    use crate::proto::{MetaGraphDef, MetaInfoDef};

    fn tagged(tags: &[&str], graph: u8) -> MetaGraphDef {
        MetaGraphDef {
            meta_info_def: Some(MetaInfoDef {
                tags: tags.iter().map(|t| t.to_string()).collect(),
                tensorflow_version: String::new(),
            }),
            graph_def: vec![graph],
            ..MetaGraphDef::default()
        }
    }

    fn chosen(metas: &[MetaGraphDef], tags: &[&str]) -> Result<u8, String> {
        let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
        choose_meta_graph(metas.to_vec(), &tags).map(|m| m.graph_def[0])
    }

    #[test]
    fn a_saved_models_meta_graph_is_chosen_by_its_tags() {
        let one = [tagged(&["serve"], 1)];
        assert_eq!(chosen(&one, &[]), Ok(1));
        assert_eq!(chosen(&one, &["serve"]), Ok(1));
        assert_eq!(
            chosen(&one, &["train"]),
            Err("the SavedModel has no MetaGraph tagged [train]; its tag sets: [serve]".into())
        );
        let two = [tagged(&["serve"], 1), tagged(&["train", "gpu"], 2)];
        assert_eq!(chosen(&two, &[]), Ok(2));
        assert_eq!(chosen(&two, &["gpu", "train", "gpu"]), Ok(2));
        let untrained = [tagged(&["serve"], 1), tagged(&["eval"], 2)];
        assert_eq!(
            chosen(&untrained, &[]),
            Err(
                "the SavedModel has MetaGraphs tagged [serve], [eval]; choose one with --tag"
                    .into()
            )
        );
    }

    #[test]
    fn tensor_names_split_into_op_and_output() {
        assert_eq!(parse_tensor_name("save/Const:0"), Some(("save/Const", 0)));
        assert_eq!(parse_tensor_name("loss:2"), Some(("loss", 2)));
        assert_eq!(parse_tensor_name("init"), Some(("init", 0)));
        assert_eq!(parse_tensor_name("x:y"), None);
    }
}
