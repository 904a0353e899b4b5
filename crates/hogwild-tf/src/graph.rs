//! A training graph: the MetaGraphDef exported by Python, imported into one TensorFlow session
//! that every worker thread shares.
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
    Graph, ImportGraphDefOptions, Library, Operation, Session, SessionOptions, SessionRunArgs,
    Status, Tensor,
};

use crate::proto::{self, MetaGraphDef, TensorInfo};
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
        }
    }
}

/// A training graph in a live session.
pub struct TrainGraph {
    path: PathBuf,
    session: Session,
    inputs: Vec<Input>,
    outputs: Vec<Endpoint>,
    init: Operation,
    train: Operation,
    saver: Saver,
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

impl TrainGraph {
    /// Loads the op libraries, imports the MetaGraphDef at `path` and creates its session. The
    /// variables are not initialised yet: call [`TrainGraph::init`] or [`TrainGraph::restore`].
    pub fn load(path: &Path, op_libraries: &[PathBuf], config: &SessionConfig) -> Result<Self> {
        let libraries = op_libraries
            .iter()
            .map(|lib| load_library(lib))
            .collect::<Result<Vec<_>>>()?;
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?;
        let bad = |reason: String| Error::BadGraph {
            path: path.into(),
            reason,
        };
        let meta = MetaGraphDef::decode(bytes.as_slice())
            .map_err(|e| bad(format!("not a binary MetaGraphDef: {e}")))?;
        if meta.graph_def.is_empty() {
            return Err(bad("the MetaGraphDef holds no graph_def".into()));
        }
        let mut graph = Graph::new();
        graph
            .import_graph_def(&meta.graph_def, &ImportGraphDefOptions::new())
            .map_err(|status| {
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
            })?;

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
        let collection_name = |key: &str| -> Option<&String> {
            meta.collection_def
                .get(key)
                .and_then(|c| c.node_list.as_ref())
                .and_then(|l| l.value.first())
        };
        let collection_op = |key: &str| -> Result<Operation> {
            let name = collection_name(key)
                .ok_or_else(|| bad(format!("no \"{key}\" collection naming an op")))?;
            op(
                &format!("collection \"{key}\""),
                name.split(':').next().unwrap_or(name),
            )
        };
        let collection_tensor = |key: &str| -> Result<Endpoint> {
            let name = collection_name(key)
                .ok_or_else(|| bad(format!("no \"{key}\" collection naming a tensor")))?;
            endpoint(&format!("collection \"{key}\""), name)
        };

        let signature = meta
            .signature_def
            .get(SIGNATURE)
            .ok_or_else(|| bad(format!("no signature_def \"{SIGNATURE}\"")))?;
        let mut inputs = signature
            .inputs
            .iter()
            .map(|(key, info)| {
                Ok(Input {
                    key: key.clone(),
                    tensor: endpoint(&format!("input \"{key}\""), &info.name)?,
                    dtype: info.dtype,
                    rank: rank(info),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        inputs.sort_by(|a, b| a.key.cmp(&b.key));
        let mut outputs = signature
            .outputs
            .iter()
            .map(|(key, info)| {
                if info.dtype != proto::DT_FLOAT {
                    return Err(bad(format!(
                        "output \"{key}\" ({}) is {}; fetched values must be float32",
                        info.name,
                        proto::dtype_name(info.dtype)
                    )));
                }
                let mut e = endpoint(&format!("output \"{key}\""), &info.name)?;
                e.name = key.clone();
                Ok(e)
            })
            .collect::<Result<Vec<_>>>()?;
        if outputs.is_empty() {
            return Err(bad(format!("signature_def \"{SIGNATURE}\" has no outputs")));
        }
        // Loss first, then the others by name: the order metrics are printed in.
        outputs.sort_by(|a, b| (a.name != "loss", &a.name).cmp(&(b.name != "loss", &b.name)));
        let init = collection_op(INIT_COLLECTION)?;
        let train = collection_op(TRAIN_COLLECTION)?;
        let saver_def = meta.saver_def.as_ref().ok_or_else(|| {
            bad("no saver_def (export the graph with a tf.compat.v1.train.Saver)".into())
        })?;
        let saver = Saver {
            filename: endpoint("saver filename tensor", &saver_def.filename_tensor_name)?,
            save: endpoint("saver save tensor", &saver_def.save_tensor_name)?,
            restore: op("saver restore op", &saver_def.restore_op_name)?,
        };
        let cluster = match collection_name(FINISH_COLLECTION) {
            None => None,
            Some(_) => Some(ClusterOps {
                ready: collection_tensor(READY_COLLECTION)?,
                finish: collection_op(FINISH_COLLECTION)?,
                finished: collection_tensor(FINISHED_COLLECTION)?,
                finished_init: collection_op(FINISHED_INIT_COLLECTION)?,
            }),
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
        let session = Session::new(&options, &graph)
            .map_err(|s| run_error(format!("creating a session for {}", path.display()), s))?;
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
            session,
            inputs,
            outputs,
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

    /// The signature's input keys, sorted.
    pub fn input_keys(&self) -> Vec<&str> {
        self.inputs.iter().map(|i| i.key.as_str()).collect()
    }

    /// The fetched values' names: `loss` first, then the others by name.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(|o| o.name.as_str()).collect()
    }

    pub(crate) fn inputs(&self) -> &[Input] {
        &self.inputs
    }

    /// The master the session connects to; `None` for a local session.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// Whether the graph was exported for a parameter-server cluster (it has the
    /// `hogwild/finish_op` collection and the others of [`crate::cluster`]'s protocol).
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

    /// Runs the initialisation op once (the startup program).
    pub fn init(&self) -> Result<()> {
        let mut args = SessionRunArgs::new();
        args.add_target(&self.init);
        self.session.run(&mut args).map_err(|s| {
            run_error(
                format!(
                    "running the init op \"{}\"",
                    self.init.name().unwrap_or_default()
                ),
                s,
            )
        })
    }

    /// Saves every variable to the checkpoint `prefix` (files `prefix.index` and
    /// `prefix.data-*`) through the graph's own saver, as `saver.save(sess, prefix)` does.
    pub fn save(&self, prefix: &Path) -> Result<()> {
        if let Some(dir) = prefix.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.into(),
                source,
            })?;
        }
        let during = || format!("saving checkpoint {}", prefix.display());
        let filename = Tensor::from(prefix.display().to_string());
        let mut args = SessionRunArgs::new();
        args.add_feed(
            &self.saver.filename.op,
            self.saver.filename.index,
            &filename,
        );
        let token = args.request_fetch(&self.saver.save.op, self.saver.save.index);
        self.session
            .run(&mut args)
            .map_err(|s| run_error(during(), s))?;
        args.fetch::<String>(token)
            .map_err(|s| run_error(during(), s))?;
        Ok(())
    }

    /// Restores every variable from the checkpoint `prefix` (in a cluster graph, also starts the
    /// finished workers' counter, which checkpoints leave out, at 0).
    pub fn restore(&self, prefix: &Path) -> Result<()> {
        let filename = Tensor::from(prefix.display().to_string());
        let mut args = SessionRunArgs::new();
        args.add_feed(
            &self.saver.filename.op,
            self.saver.filename.index,
            &filename,
        );
        args.add_target(&self.saver.restore);
        if let Some(ops) = &self.cluster {
            args.add_target(&ops.finished_init);
        }
        self.session
            .run(&mut args)
            .map_err(|s| run_error(format!("restoring checkpoint {}", prefix.display()), s))
    }

    /// Runs one step: feeds `feeds` (input position in [`TrainGraph::inputs`], tensor), applies the
    /// optimizer when `train`, and returns every output's value in [`TrainGraph::output_names`]
    /// order. `during` names the step in errors.
    pub(crate) fn step(
        &self,
        feeds: &[(usize, crate::inputs::FeedTensor)],
        train: bool,
        during: &dyn Fn() -> String,
        out: &mut [f64],
    ) -> Result<()> {
        let mut args = SessionRunArgs::new();
        if !self.run_options.is_empty() {
            args.set_run_options(&self.run_options);
        }
        for (input, tensor) in feeds {
            let t = &self.inputs[*input].tensor;
            match tensor {
                crate::inputs::FeedTensor::I64(x) => args.add_feed(&t.op, t.index, x),
                crate::inputs::FeedTensor::F32(x) => args.add_feed(&t.op, t.index, x),
            }
        }
        if train {
            args.add_target(&self.train);
        }
        let tokens: Vec<_> = self
            .outputs
            .iter()
            .map(|o| args.request_fetch(&o.op, o.index))
            .collect();
        self.session
            .run(&mut args)
            .map_err(|s| run_error(during(), s))?;
        for ((token, output), slot) in tokens.into_iter().zip(&self.outputs).zip(out.iter_mut()) {
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
    use super::parse_tensor_name;

    #[test]
    fn tensor_names_split_into_op_and_output() {
        assert_eq!(parse_tensor_name("save/Const:0"), Some(("save/Const", 0)));
        assert_eq!(parse_tensor_name("loss:2"), Some(("loss", 2)));
        assert_eq!(parse_tensor_name("init"), Some(("init", 0)));
        assert_eq!(parse_tensor_name("x:y"), None);
    }
}
