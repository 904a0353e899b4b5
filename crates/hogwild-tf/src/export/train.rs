//! Native models as training graphs for `hogwild tf-train`: the serving graph's forward pass,
//! the loss and its gradients written out (the models' own backward passes, not TensorFlow's
//! symbolic ones, so that the embedding rows get sparse updates as natively), and the model's
//! optimizer as TensorFlow's resource apply ops (`ResourceApplyGradientDescent` /
//! `ResourceScatterSub` for SGD, `ResourceApplyAdagrad` / `ResourceSparseApplyAdagrad`, and
//! DeepRec's `ResourceApplyAdamAsync` / `ResourceSparseApplyAdamAsync` from the op library for
//! AdamAsync). The graph follows the runner's contract (`graph.rs`): signature `train`, the
//! `init_op` and `train_op` collections and a saver; its checkpoint holds every table's weights,
//! optimizer slots and scalars under the names [`crate::import`] reads back.
//!
//! A native step applies each instance's gradient before reading the next instance; the graph
//! applies a batch's summed gradient once, so the two agree step for step on batches of one
//! instance. Duplicate rows of an instance are applied one after the other by the sparse apply
//! ops, as natively.

use std::path::{Path, PathBuf};

use hogwild::models::OptimizerConfig;
use hogwild::Table;
use prost::Message;
use tensorflow::{DataType, Operation, Output};

use super::bow::{self, BowParts};
use super::checkpoint::{self, Named};
use super::ctr::{self, CtrParts};
use super::graph::Builder;
use super::Exportable;
use crate::{Error, Result};

/// The training graph's file in the output directory of [`tf_train_graph`] (a binary
/// MetaGraphDef, `tf-train --graph`).
pub const GRAPH_FILE: &str = "graph.meta";
/// The prefix, in the same directory, of the checkpoint holding the model's weights and
/// optimizer state (`tf-train --restore`).
pub const CHECKPOINT_PREFIX: &str = "ckpt";

/// The checkpoint names of a table's optimizer state: its slots (as many as the optimizer has,
/// each a float32 tensor of the table's shape) and scalars (float32, shape `[]`). SGD has none,
/// Adagrad the slot `<table>/accumulator`, AdamAsync the slots `<table>/m` and `<table>/v` and
/// the scalars `<table>/beta1_power` and `<table>/beta2_power`.
pub fn state_names(table: &str, optimizer: &OptimizerConfig) -> (Vec<String>, Vec<String>) {
    match optimizer {
        OptimizerConfig::Sgd { .. } => (Vec::new(), Vec::new()),
        OptimizerConfig::Adagrad { .. } => (vec![format!("{table}/accumulator")], Vec::new()),
        OptimizerConfig::AdamAsync { .. } => (
            vec![format!("{table}/m"), format!("{table}/v")],
            vec![
                format!("{table}/beta1_power"),
                format!("{table}/beta2_power"),
            ],
        ),
    }
}

/// Where a training graph runs.
#[derive(Debug, Clone, Default)]
pub struct TrainTarget {
    /// Op libraries to load before building (AdamAsync's apply ops come from ours).
    pub op_libraries: Vec<PathBuf>,
    /// For a parameter-server cluster of this many ps tasks (0: one process): the tables go
    /// round-robin on the ps tasks, each with its optimizer state, and the graph has the
    /// runner's cluster protocol (`ready_op` and the `hogwild/finish*` collections).
    pub ps_tasks: usize,
    /// A bag-of-words model of the linear learning-rate schedule: the instances its `tf-train`
    /// run will take, all epochs (and all workers) together, over which the rate decays as
    /// natively; the graph counts them in the variable `hogwild/instances_done`, which its
    /// checkpoints keep. `None`: the optimizer's rate throughout.
    pub lr_decay_instances: Option<u64>,
}

/// Writes `model`'s training graph to `dir/graph.meta` and its weights and optimizer state to
/// the checkpoint `dir/ckpt`; `dir` must not exist or be empty. `tables` are the model's tables
/// (`Model::tables`), whose optimizer state the checkpoint holds under [`state_names`];
/// `optimizer` is the model's, which the graph's apply ops follow. The directory appears only
/// once complete.
///
/// # Errors
///
/// [`Error::BadOption`]: `-o` for a `dir` that is not empty, `--format` for a model the
/// training graph cannot express (a word2vec model, a bag-of-words model with `loss = "ns"`, a
/// field-aware machine with AdamAsync), `--op-library` for an AdamAsync model without the op
/// library. [`Error::SlotMismatch`] when the DataFeedDesc has no label slot,
/// [`Error::OpLibrary`] for a library that does not load, [`Error::Io`] or [`Error::Run`] when
/// writing fails.
pub fn tf_train_graph(
    model: &Exportable<'_>,
    tables: &[&Table],
    optimizer: &OptimizerConfig,
    target: &TrainTarget,
    dir: &Path,
) -> Result<()> {
    let op_libraries = &target.op_libraries;
    super::check_target(dir)?;
    let mut b = Builder::new();
    b.ps_tasks = target.ps_tasks;
    let mut t = Trainer {
        optimizer: *optimizer,
        applies: Vec::new(),
        lr: None,
        extra: Vec::new(),
    };
    let metrics = match model {
        Exportable::Bow(m) => bow_train(&mut b, &mut t, m, target.lr_decay_instances)?,
        Exportable::Ctr(m) => ctr_train(&mut b, &mut t, m)?,
        Exportable::Word2Vec(_) => {
            return Err(Error::BadOption {
                option: "--format",
                reason: "a word2vec model has no training graph (its vectors export with \
                         --format word2vec or saved-model)"
                    .into(),
            })
        }
    };
    // The optimizer state of every table.
    for table in tables {
        let (slots, scalars) = state_names(table.name(), optimizer);
        let dims = [table.rows() as u64, table.dim() as u64];
        for s in &slots {
            b.variable(s, &dims, false)?;
        }
        for s in &scalars {
            b.variable(s, &[], false)?;
        }
    }
    if matches!(optimizer, OptimizerConfig::AdamAsync { .. }) && op_libraries.is_empty() {
        return Err(Error::BadOption {
            option: "--op-library",
            reason: "an adam_async model's training graph uses DeepRec's AdamAsync ops: give \
                     the op library that defines them (build/plugin/libadam_async_ops.so, \
                     `make plugin`)"
                .into(),
        });
    }
    let _libraries = op_libraries
        .iter()
        .map(|lib| crate::graph::load_library(lib))
        .collect::<Result<Vec<_>>>()?;
    let mut applies = t.apply_all(&mut b, &metrics)?;
    applies.extend(t.extra.iter().cloned());
    let train = b.group("train", &applies)?;
    let mut inits: Vec<Operation> = b.initializers()?;
    let names = |op: &Operation| {
        op.name()
            .map_err(|e| crate::graph::run_error("naming", e.into()))
    };
    let mut collections = Vec::new();
    if target.ps_tasks > 0 {
        let protocol = cluster_protocol(&mut b)?;
        inits.push(protocol.counter_init.clone());
        collections.extend([
            ("ready_op", vec![protocol.ready]),
            ("hogwild/finish_op", vec![names(&protocol.finish)?]),
            ("hogwild/finished_workers", vec![protocol.finished]),
            (
                "hogwild/finished_workers_init",
                vec![names(&protocol.counter_init)?],
            ),
        ]);
    }
    let init = b.group("init", &inits)?;
    collections.push(("init_op", vec![names(&init)?]));
    collections.push(("train_op", vec![names(&train)?]));
    let meta = b.meta_graph(&["train"], "train", "hogwild/train", &collections)?;
    let mut tensors = state_tensors(tables, optimizer)?;
    if t.lr.is_some() {
        tensors.push(checkpoint::count(INSTANCES_DONE, 0));
    }
    super::write_dir(dir, |tmp| {
        let path = tmp.join(GRAPH_FILE);
        std::fs::write(&path, meta.encode_to_vec()).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        checkpoint::write(&tmp.join(CHECKPOINT_PREFIX), &tensors)
    })
}

/// The ops of the runner's protocol in a cluster (`cluster.rs`): the names of the variables not
/// initialised yet, which the workers other than the chief poll, and a counter of finished
/// workers on ps task 0, which the chief waits on before it saves (left out of checkpoints).
struct Protocol {
    ready: String,
    finish: Operation,
    finished: String,
    counter_init: Operation,
}

fn cluster_protocol(b: &mut Builder) -> Result<Protocol> {
    let name = "hogwild/finished_workers";
    let counter: Output = b
        .node("VarHandleOp", name, &[], |nd| {
            nd.set_device("/job:ps/task:0")?;
            nd.set_attr_type("dtype", DataType::Int64)?;
            nd.set_attr_shape("shape", &tensorflow::Shape::from(Some(vec![])))?;
            nd.set_attr_string("shared_name", name)?;
            nd.set_attr_string("container", "")
        })?
        .into();
    let zero = b.scalar("hogwild/zero", 0i64)?;
    let one = b.scalar("hogwild/one", 1i64)?;
    let counter_init = b.node(
        "AssignVariableOp",
        "hogwild/finished_workers/Assign",
        &[&counter, &zero],
        |nd| nd.set_attr_type("dtype", DataType::Int64),
    )?;
    let finish = b.node(
        "AssignAddVariableOp",
        "hogwild/finish",
        &[&counter, &one],
        |nd| nd.set_attr_type("dtype", DataType::Int64),
    )?;
    let finished = b.op_typed(
        "ReadVariableOp",
        "hogwild/finished",
        &[&counter],
        "dtype",
        DataType::Int64,
    )?;
    // report_uninitialized_variables: the names of the variables not initialised.
    let mut handles: Vec<(String, Output)> = b
        .vars
        .iter()
        .map(|v| (v.name.clone(), v.handle.clone()))
        .collect();
    handles.push((name.to_string(), counter));
    let mut flags = Vec::new();
    let one_dim = b.vector("hogwild/ready/one", &[1i64])?;
    for (n, h) in &handles {
        let f = b.op("VarIsInitializedOp", &format!("hogwild/ready/{n}"), &[h])?;
        flags.push(b.op(
            "Reshape",
            &format!("hogwild/ready/{n}_flag"),
            &[&f, &one_dim],
        )?);
    }
    let all = b.concat("hogwild/ready/initialized", &flags, 0)?;
    let not = b.op("LogicalNot", "hogwild/ready/uninitialized", &[&all])?;
    let at = b.where_true("hogwild/ready/at", &not)?;
    let names: Vec<String> = handles.iter().map(|(n, _)| n.clone()).collect();
    let names = b.vector("hogwild/ready/names", &names)?;
    let ready = b.gather("hogwild/ready", &names, &at)?;
    let tensor = |o: &Output| -> Result<String> {
        Ok(format!(
            "{}:{}",
            o.operation
                .name()
                .map_err(|e| crate::graph::run_error("naming", e.into()))?,
            o.index
        ))
    };
    Ok(Protocol {
        ready: tensor(&ready)?,
        finish,
        finished: tensor(&finished)?,
        counter_init,
    })
}

/// Every table's weights, slots and scalars as the checkpoint holds them.
fn state_tensors(tables: &[&Table], optimizer: &OptimizerConfig) -> Result<Vec<Named>> {
    let mut out = Vec::new();
    for table in tables {
        let (rows, dim) = (table.rows(), table.dim());
        let (slots, scalars) = state_names(table.name(), optimizer);
        let mut values = vec![vec![0f32; rows * dim]; 1 + slots.len()];
        let mut row = vec![0f32; table.stride()];
        for r in 0..rows {
            table.read_row(r, &mut row);
            for (k, v) in values.iter_mut().enumerate() {
                v[r * dim..(r + 1) * dim].copy_from_slice(&row[k * dim..(k + 1) * dim]);
            }
        }
        if let OptimizerConfig::Adagrad {
            initial_accumulator,
            ..
        } = optimizer
        {
            // The store keeps an accumulator never updated as zero, read as its initial value
            // (`Adagrad::slot_value`); TensorFlow's starts at that value.
            for a in values[1].iter_mut().filter(|a| **a == 0.0) {
                *a = *initial_accumulator;
            }
        }
        let dims = [rows as u64, dim as u64];
        let mut values = values.into_iter();
        out.push(checkpoint::matrix(
            table.name(),
            &dims,
            values.next().unwrap_or_default(),
        )?);
        for (name, v) in slots.iter().zip(values) {
            out.push(checkpoint::matrix(name, &dims, v)?);
        }
        for (name, &v) in scalars.iter().zip(&table.scalars()) {
            out.push(checkpoint::matrix(name, &[], vec![v])?);
        }
    }
    Ok(out)
}

/// The variable counting the instances trained, for the learning-rate schedule.
const INSTANCES_DONE: &str = "hogwild/instances_done";

/// The updates of a step: each table's gradient, dense or of rows.
struct Trainer {
    optimizer: OptimizerConfig,
    applies: Vec<(String, Output, Option<Output>)>,
    /// The step's learning rate, when a schedule sets it (otherwise the optimizer's).
    lr: Option<Output>,
    /// More ops of the step (the schedule's count).
    extra: Vec<Operation>,
}

impl Trainer {
    /// Table `table` gets `grad` (its whole shape), or with `indices`, `grad`'s rows added to
    /// those rows.
    fn update(&mut self, table: &str, grad: Output, indices: Option<Output>) {
        self.applies.push((table.to_string(), grad, indices));
    }

    /// The apply ops, each after every gradient and metric is computed (the gradients read the
    /// weights before any update, as a native step does).
    fn apply_all(&self, b: &mut Builder, metrics: &[Output]) -> Result<Vec<Operation>> {
        let mut before: Vec<Operation> = metrics.iter().map(|m| m.operation.clone()).collect();
        before.extend(self.applies.iter().map(|(_, g, _)| g.operation.clone()));
        let ready = b.group("gradients_ready", &before)?;
        let mut ops = Vec::new();
        for (table, grad, indices) in &self.applies {
            ops.push(self.apply(b, table, grad, indices.as_ref(), &ready)?);
        }
        Ok(ops)
    }

    fn apply(
        &self,
        b: &mut Builder,
        table: &str,
        grad: &Output,
        indices: Option<&Output>,
        ready: &Operation,
    ) -> Result<Operation> {
        let (slots, scalars) = state_names(table, &self.optimizer);
        let var = b.handle(table)?;
        let p = format!("train/{table}");
        let lr = match &self.lr {
            Some(lr) => lr.clone(),
            None => b.scalar(&format!("{p}/lr"), self.optimizer.lr())?,
        };
        let ready = std::slice::from_ref(ready);
        match (&self.optimizer, indices) {
            (OptimizerConfig::Sgd { .. }, None) => b.node_after(
                "ResourceApplyGradientDescent",
                &p,
                &[&var, &lr, grad],
                ready,
                |_| Ok::<(), tensorflow::Status>(()),
            ),
            (OptimizerConfig::Sgd { .. }, Some(rows)) => {
                // Duplicate rows add up, as SGD's steps one after the other do.
                let delta = b.op("Mul", &format!("{p}/delta"), &[grad, &lr])?;
                b.node_after(
                    "ResourceScatterSub",
                    &p,
                    &[&var, rows, &delta],
                    ready,
                    |_| Ok::<(), tensorflow::Status>(()),
                )
            }
            (OptimizerConfig::Adagrad { .. }, rows) => {
                let acc = b.handle(&slots[0])?;
                match rows {
                    None => b.node_after(
                        "ResourceApplyAdagrad",
                        &p,
                        &[&var, &acc, &lr, grad],
                        ready,
                        |_| Ok::<(), tensorflow::Status>(()),
                    ),
                    Some(rows) => b.node_after(
                        "ResourceSparseApplyAdagrad",
                        &p,
                        &[&var, &acc, &lr, grad, rows],
                        ready,
                        |_| Ok::<(), tensorflow::Status>(()),
                    ),
                }
            }
            (
                OptimizerConfig::AdamAsync {
                    beta1,
                    beta2,
                    epsilon,
                    rmsprop,
                    nesterov,
                    ..
                },
                rows,
            ) => {
                let (m, v) = (b.handle(&slots[0])?, b.handle(&slots[1])?);
                let (b1p, b2p) = (b.handle(&scalars[0])?, b.handle(&scalars[1])?);
                let beta1 = b.scalar(&format!("{p}/beta1"), *beta1)?;
                let beta2 = b.scalar(&format!("{p}/beta2"), *beta2)?;
                let eps = b.scalar(&format!("{p}/epsilon"), *epsilon)?;
                let (rmsprop, nesterov) = (*rmsprop, *nesterov);
                let common = [&var, &m, &v, &b1p, &b2p, &lr, &beta1, &beta2, &eps, grad];
                match rows {
                    None => b.node_after("ResourceApplyAdamAsync", &p, &common, ready, |nd| {
                        nd.set_attr_bool("use_nesterov", nesterov)
                    }),
                    Some(rows) => {
                        let mut inputs = common.to_vec();
                        inputs.push(rows);
                        b.node_after("ResourceSparseApplyAdamAsync", &p, &inputs, ready, |nd| {
                            nd.set_attr_bool("apply_sparse_rmsprop", rmsprop)
                        })
                    }
                }
            }
        }
    }
}

/// The bag-of-words classifier's training graph (softmax loss): inputs the words and label
/// slots, outputs `loss` and `accuracy`; the output layer's dense gradient and the embedding
/// rows' gradients.
fn bow_train(
    b: &mut Builder,
    t: &mut Trainer,
    m: &BowParts<'_>,
    decay_instances: Option<u64>,
) -> Result<Vec<Output>> {
    use hogwild::models::Loss;

    let cfg = m.config;
    if cfg.loss == Loss::Ns {
        return Err(Error::BadOption {
            option: "--format",
            reason: "tf-train exports the softmax, hs and ova losses, not loss = \"ns\", whose \
                     negatives each native worker draws from its own random stream (it exports \
                     as saved-model)"
                .into(),
        });
    }
    let f = bow::forward(b, m)?;
    if let (hogwild::models::LrSchedule::Linear, Some(total)) = (cfg.lr_schedule, decay_instances) {
        linear_decay(b, t, &f.instances, total, cfg.lr_hold)?;
    }
    let axis0 = b.scalar("train/axis0", 0i32)?;
    let axis1 = b.scalar("train/axis1", 1i32)?;
    let best: Output = b
        .node("ArgMax", "train/best", &[&f.scores, &axis1], |nd| {
            nd.set_attr_type("output_type", DataType::Int64)
        })?
        .into();
    if cfg.loss == Loss::Hs {
        return hs_train(b, t, m, &f);
    }
    let (per_instance, dz, right) = if cfg.loss == Loss::Softmax {
        let label = b.input(&cfg.label_slot, DataType::Int64, &[-1])?;
        let xent = b.node(
            "SparseSoftmaxCrossEntropyWithLogits",
            "train/cross_entropy",
            &[&f.scores, &label],
            |_| Ok::<(), tensorflow::Status>(()),
        )?;
        let per_instance = Output {
            operation: xent.clone(),
            index: 0,
        };
        let dz = Output {
            operation: xent,
            index: 1,
        };
        let right = b.op("Equal", "train/right", &[&best, &label])?;
        let right = b.op_typed("Cast", "train/right_f", &[&right], "DstT", DataType::Float)?;
        (per_instance, dz, right)
    } else {
        // ova: one sigmoid per class, y = 1 for each of the instance's labels.
        let labels = b.ragged_input(&cfg.label_slot, DataType::Int64)?;
        let owner = b.op(
            "ExpandDims",
            "train/label_instance",
            &[&labels.segments, &axis1],
        )?;
        let class = b.op("ExpandDims", "train/label_class", &[&labels.values, &axis1])?;
        let at = b.concat("train/label_at", &[owner, class], 1)?;
        let one_dim = b.vector("train/one_dim", &[1i64])?;
        let n = b.op("Reshape", "train/instances_dim", &[&f.instances, &one_dim])?;
        let classes = b.vector("train/classes", &[cfg.classes as i64])?;
        let shape = b.concat("train/y_shape", &[n, classes], 0)?;
        let ones = b.op("OnesLike", "train/label_ones", &[&labels.values])?;
        let ones = b.op_typed(
            "Cast",
            "train/label_ones_f",
            &[&ones],
            "DstT",
            DataType::Float,
        )?;
        let y = b.op("ScatterNd", "train/y_count", &[&at, &ones, &shape])?;
        // A label written twice is one of the instance's labels, as once.
        let one = b.scalar("train/one", 1f32)?;
        let y = b.op("Minimum", "train/y", &[&y, &one])?;
        let p = b.op("Sigmoid", "train/p", &[&f.scores])?;
        let dz = b.op("Sub", "train/dz", &[&p, &y])?;
        let z = &f.scores;
        let relu = b.op("Relu", "train/relu", &[z])?;
        let zy = b.op("Mul", "train/zy", &[z, &y])?;
        let abs = b.op("Abs", "train/abs", &[z])?;
        let neg = b.op("Neg", "train/neg_abs", &[&abs])?;
        let exp = b.op("Exp", "train/exp", &[&neg])?;
        let log1p = b.op("Log1p", "train/log1p", &[&exp])?;
        let l = b.op("Sub", "train/relu_zy", &[&relu, &zy])?;
        let l = b.op("AddV2", "train/logloss", &[&l, &log1p])?;
        let per_instance = b.op("Sum", "train/per_instance", &[&l, &axis1])?;
        // Right when the most probable class is one of the labels.
        let right: Output = b
            .node("GatherV2", "train/right_f", &[&y, &best, &axis1], |nd| {
                nd.set_attr_int("batch_dims", 1)
            })?
            .into();
        (per_instance, dz, right)
    };
    let loss = b.op("Mean", "train/loss", &[&per_instance, &axis0])?;
    let accuracy = b.op("Mean", "train/accuracy", &[&right, &axis0])?;
    let loss = b.output("loss", &loss, DataType::Float, &[])?;
    let accuracy = b.output("accuracy", &accuracy, DataType::Float, &[])?;

    // The output layer: each row's score gradient times the pooled vector (and the bias input,
    // 1 with a bias and 0 without).
    let d_w: Output = b
        .node("MatMul", "train/d_weights", &[&dz, &f.hidden], |nd| {
            nd.set_attr_bool("transpose_a", true)
        })?
        .into();
    let d_b = b.op("Sum", "train/d_bias_sum", &[&dz, &axis0])?;
    let column = b.vector("train/column", &[-1i64, 1])?;
    let mut d_b = b.op("Reshape", "train/d_bias", &[&d_b, &column])?;
    if !cfg.bias {
        d_b = b.op("ZerosLike", "train/d_no_bias", &[&d_b])?;
    }
    let d_out = b.concat("train/d_output", &[d_w, d_b], 1)?;
    // The pooled vector's gradient, through the weights before their update, to every row.
    let d_h = b.op("MatMul", "train/d_hidden", &[&dz, &f.weights])?;
    t.update("output", d_out, None);
    embedding_update(b, t, &f, &d_h)?;
    Ok(vec![loss, accuracy])
}

/// Logistic regression and the factorization machine: inputs the slots the model reads, the
/// label and (with `weight_slot`) the importance weights; output the weighted mean logistic
/// loss. With `g = weight (p - y)`, a feature of value `x` gets `g x + l2 w` for its weight and
/// `g x (sum_k - x v_k) + l2 v_k` for factor `k` (the native `Ctr::update`), the bias `g`.
fn ctr_train(b: &mut Builder, t: &mut Trainer, m: &CtrParts<'_>) -> Result<Vec<Output>> {
    use hogwild::feed::SlotType;
    use hogwild::models::CtrKind;

    let cfg = m.config;
    if m.kind == CtrKind::Ffm && matches!(t.optimizer, OptimizerConfig::AdamAsync { .. }) {
        // Natively a field-aware row steps only the factor blocks the instance touched; a
        // sparse apply steps whole rows, which AdamAsync's moments tell apart from no step.
        return Err(Error::BadOption {
            option: "--format",
            reason: "tf-train exports the field-aware factorization machine with sgd or \
                     adagrad, not adam_async (it exports as saved-model)"
                .into(),
        });
    }
    let f = ctr::forward(b, m)?;
    let used = m.desc.used_slots();
    let slot_type = |name: &str| used.iter().find(|s| s.name == name).map(|s| s.slot_type());
    let label_type = slot_type(&cfg.label_slot).ok_or_else(|| Error::SlotMismatch {
        slot: cfg.label_slot.clone(),
        reason: "training needs the label slot: the DataFeedDesc (--feed) has no used slot of \
                 that name"
            .into(),
    })?;
    let (dtype, label, zero) = match label_type {
        SlotType::U64 => {
            let l = b.input(&cfg.label_slot, DataType::Int64, &[-1])?;
            (DataType::Int64, l, b.scalar("train/label_zero", 0i64)?)
        }
        SlotType::F32 => {
            let l = b.input(&cfg.label_slot, DataType::Float, &[-1])?;
            (DataType::Float, l, b.scalar("train/label_zero", 0f32)?)
        }
    };
    let _ = dtype;
    // A click is a label above 0 (uint64 labels are 0 or 1).
    let click = b.op("Greater", "train/click", &[&label, &zero])?;
    let y = b.op_typed("Cast", "train/y", &[&click], "DstT", DataType::Float)?;
    let p = b.op("Sigmoid", "train/p", &[&f.logit])?;
    let mut g = b.op("Sub", "train/g", &[&p, &y])?;
    // The logistic loss max(z, 0) - z y + ln(1 + exp(-|z|)).
    let relu = b.op("Relu", "train/relu", &[&f.logit])?;
    let zy = b.op("Mul", "train/zy", &[&f.logit, &y])?;
    let abs = b.op("Abs", "train/abs", &[&f.logit])?;
    let neg = b.op("Neg", "train/neg_abs", &[&abs])?;
    let exp = b.op("Exp", "train/exp", &[&neg])?;
    let log1p = b.op("Log1p", "train/log1p", &[&exp])?;
    let l = b.op("Sub", "train/relu_zy", &[&relu, &zy])?;
    let mut per_instance = b.op("AddV2", "train/logloss", &[&l, &log1p])?;
    let l2 = b.scalar("train/l2", cfg.l2)?;
    let axis0 = b.scalar("train/axis0", 0i32)?;
    let axis1 = b.scalar("train/axis1", 1i32)?;
    let weighted = cfg.weight_slot.as_ref().filter(|w| slot_type(w).is_some());
    let (loss, l2_of) = match weighted {
        Some(slot) => {
            let w = b.input(slot, DataType::Float, &[-1])?;
            g = b.op("Mul", "train/g_weighted", &[&g, &w])?;
            per_instance = b.op("Mul", "train/logloss_weighted", &[&per_instance, &w])?;
            let total = b.op("Sum", "train/loss_sum", &[&per_instance, &axis0])?;
            let weights = b.op("Sum", "train/weight_sum", &[&w, &axis0])?;
            let loss = b.op("DivNoNan", "train/loss", &[&total, &weights])?;
            let l2w = b.op("Mul", "train/l2_weighted", &[&w, &l2])?;
            (loss, Some(l2w))
        }
        None => (b.op("Mean", "train/loss", &[&per_instance, &axis0])?, None),
    };
    let loss = b.output("loss", &loss, DataType::Float, &[])?;

    // Per feature.
    let gf = b.gather("train/g_feature", &g, &f.owner)?;
    let gx = b.op("Mul", "train/gx", &[&gf, &f.x])?;
    let l2f = match &l2_of {
        Some(l2w) => b.gather("train/l2_feature", l2w, &f.owner)?,
        None => {
            let ones = b.op("OnesLike", "train/l2_ones", &[&gx])?;
            b.op("Mul", "train/l2_feature", &[&ones, &l2])?
        }
    };
    let begin = b.vector("train/w_begin", &[0i64, 0])?;
    let size = b.vector("train/w_size", &[-1i64, 1])?;
    let w = b.op("Slice", "train/w", &[&f.vals, &begin, &size])?;
    let gx_c = b.op("ExpandDims", "train/gx_column", &[&gx, &axis1])?;
    let l2_c = b.op("ExpandDims", "train/l2_column", &[&l2f, &axis1])?;
    let l2w = b.op("Mul", "train/l2_w", &[&l2_c, &w])?;
    let gw = b.op("AddV2", "train/g_w", &[&gx_c, &l2w])?;
    let grad = match (&f.ffm, &f.sum) {
        (Some(p), _) => ffm_grad(b, p, &f, &g, &l2f)?,
        (None, Some(sum)) => {
            let begin = b.vector("train/v_begin", &[0i64, 1])?;
            let size = b.vector("train/v_size", &[-1i64, -1])?;
            let v = b.op("Slice", "train/v", &[&f.vals, &begin, &size])?;
            let s = b.gather("train/sum_feature", sum, &f.owner)?;
            let x_c = b.op("ExpandDims", "train/x_column", &[&f.x, &axis1])?;
            let xv = b.op("Mul", "train/xv", &[&x_c, &v])?;
            let others = b.op("Sub", "train/others", &[&s, &xv])?;
            let gv = b.op("Mul", "train/gv_data", &[&gx_c, &others])?;
            let l2v = b.op("Mul", "train/l2_v", &[&l2_c, &v])?;
            let gv = b.op("AddV2", "train/g_v", &[&gv, &l2v])?;
            b.concat("train/g_rows", &[gw, gv], 1)?
        }
        (None, None) => gw,
    };
    for (i, table) in m.tables.iter().enumerate() {
        let name = table.name();
        let (rows, grad) = if m.tables.len() == 1 {
            (f.rows.clone(), grad.clone())
        } else {
            let p = format!("train/{name}");
            let ti = b.scalar(&format!("{p}/table"), i as i64)?;
            let is = b.op("Equal", &format!("{p}/is"), &[&f.table_ids, &ti])?;
            let at = b.where_true(&format!("{p}/at"), &is)?;
            let rows = b.gather(&format!("{p}/rows"), &f.rows, &at)?;
            let g_all = b.gather(&format!("{p}/g_all"), &grad, &at)?;
            let begin = b.vector(&format!("{p}/g_begin"), &[0i64, 0])?;
            let size = b.vector(&format!("{p}/g_size"), &[-1i64, table.dim() as i64])?;
            (
                rows,
                b.op("Slice", &format!("{p}/g"), &[&g_all, &begin, &size])?,
            )
        };
        t.update(name, grad, Some(rows));
    }
    let _ = (&f.instances, &f.dims, f.width);
    let total = b.op("Sum", "train/g_bias_sum", &[&g, &axis0])?;
    let shape = b.vector("train/bias_shape", &[1i64, 1])?;
    let d_bias = b.op("Reshape", "train/g_bias", &[&total, &shape])?;
    t.update("bias", d_bias, None);
    Ok(vec![loss])
}

/// The bag-of-words linear schedule (`LinearDecay::scale_after`): a batch starting `done`
/// instances into a run of `total` trains at the optimizer's rate while `done / total <= hold`,
/// then at `(1 - f) / (1 - hold)` of it, `f = min(done / total, 1)`; the batch then adds its
/// instances to the count.
fn linear_decay(
    b: &mut Builder,
    t: &mut Trainer,
    instances: &Output,
    total: u64,
    hold: f64,
) -> Result<()> {
    b.variable_of(INSTANCES_DONE, &[], DataType::Int64, false)?;
    let counter = b.handle(INSTANCES_DONE)?;
    let done = b.op_typed(
        "ReadVariableOp",
        "schedule/done",
        &[&counter],
        "dtype",
        DataType::Int64,
    )?;
    let add = b.node_after(
        "AssignAddVariableOp",
        "schedule/advance",
        &[&counter, instances],
        std::slice::from_ref(&done.operation),
        |nd| nd.set_attr_type("dtype", DataType::Int64),
    )?;
    t.extra.push(add);
    let done = b.op_typed(
        "Cast",
        "schedule/done_f64",
        &[&done],
        "DstT",
        DataType::Double,
    )?;
    let total = b.scalar("schedule/total", total.max(1) as f64)?;
    let one = b.scalar("schedule/one", 1f64)?;
    let f = b.op("RealDiv", "schedule/fraction_raw", &[&done, &total])?;
    let f = b.op("Minimum", "schedule/fraction", &[&f, &one])?;
    let hold_c = b.scalar("schedule/hold", hold)?;
    let rest = b.scalar("schedule/decay_share", 1.0 - hold)?;
    let left = b.op("Sub", "schedule/left", &[&one, &f])?;
    let decayed = b.op("RealDiv", "schedule/decayed", &[&left, &rest])?;
    let held = b.op("LessEqual", "schedule/held", &[&f, &hold_c])?;
    let scale = b.op("SelectV2", "schedule/scale_f64", &[&held, &one, &decayed])?;
    let scale = b.op_typed("Cast", "schedule/scale", &[&scale], "DstT", DataType::Float)?;
    let lr = b.scalar("schedule/base_lr", t.optimizer.lr())?;
    t.lr = Some(b.op("Mul", "schedule/lr", &[&lr, &scale])?);
    Ok(())
}

/// The field-aware factorization machine's row gradients (`ffm.rs`'s `ffm_update`): with `c =
/// g n x_i x_j`, each pair `(i, j)` adds `c v_{j,f_i}` to `v_{i,f_j}` and `c v_{i,f_j}` to
/// `v_{j,f_i}`; the weight gets `g sqrt(n) x_i + l2 w_i`, and the factor blocks a pair touched
/// `l2 v`. The blocks no pair touched get no gradient (SGD and Adagrad then leave them as they
/// are, as natively).
fn ffm_grad(
    b: &mut Builder,
    p: &ctr::FfmParts,
    f: &ctr::Forward,
    g: &Output,
    l2f: &Output,
) -> Result<Output> {
    let (blocks, k) = (p.blocks as i64, p.k as i64);
    let gn = match &p.norm {
        Some(n) => b.op("Mul", "train/ffm/gn", &[g, n])?,
        None => g.clone(),
    };
    let shape3 = b.vector("train/ffm/shape3", &[-1i64, 1, 1])?;
    let gn3 = b.op("Reshape", "train/ffm/gn3", &[&gn, &shape3])?;
    let axis1 = b.scalar("train/ffm/axis1", 1i32)?;
    let axis2 = b.scalar("train/ffm/axis2", 2i32)?;
    let axis3 = b.scalar("train/ffm/axis3", 3i32)?;
    let xi = b.op("ExpandDims", "train/ffm/x_i", &[&p.x, &axis2])?;
    let xj = b.op("ExpandDims", "train/ffm/x_j", &[&p.x, &axis1])?;
    let xx = b.op("Mul", "train/ffm/xx", &[&xi, &xj])?;
    let off = b.op(
        "NotEqual",
        "train/ffm/off_diagonal",
        &[&p.range_i, &p.range_j],
    )?;
    let off = b.op_typed("Cast", "train/ffm/off", &[&off], "DstT", DataType::Float)?;
    let c = b.op("Mul", "train/ffm/c_x", &[&gn3, &xx])?;
    let c = b.op("Mul", "train/ffm/c", &[&c, &off])?;
    let c4 = b.op("ExpandDims", "train/ffm/c4", &[&c, &axis3])?;
    // d v[b, i, f_j] += c[b, i, j] v[b, j, f_i], gathered into each field's block.
    let dg = b.op("Mul", "train/ffm/d_pairs", &[&c4, &p.mirrored])?;
    let depth = b.scalar("train/ffm/depth", blocks as i32)?;
    let on = b.scalar("train/ffm/on", 1f32)?;
    let offv = b.scalar("train/ffm/off_value", 0f32)?;
    let oh = b.op(
        "OneHot",
        "train/ffm/field_one_hot",
        &[&p.fields, &depth, &on, &offv],
    )?;
    let perm = b.vector("train/ffm/perm", &[0i32, 1, 3, 2])?;
    let dgt = b.op("Transpose", "train/ffm/d_pairs_t", &[&dg, &perm])?;
    let oh4 = b.op("ExpandDims", "train/ffm/one_hot4", &[&oh, &axis1])?;
    let dvt = b.op("BatchMatMulV2", "train/ffm/d_blocks_t", &[&dgt, &oh4])?;
    let dvd = b.op("Transpose", "train/ffm/d_blocks", &[&dvt, &perm])?;
    // The blocks a pair touched: fields of the instance's other features.
    let ones = b.op("OnesLike", "train/ffm/ones", &[&f.x])?;
    let real = b.op("ScatterNd", "train/ffm/real", &[&p.at, &ones, &p.dense2])?;
    let real_j = b.op("ExpandDims", "train/ffm/real_j", &[&real, &axis1])?;
    let pairs = b.op("Mul", "train/ffm/pairs", &[&off, &real_j])?;
    let touched = b.op("BatchMatMulV2", "train/ffm/touch_count", &[&pairs, &oh])?;
    let zero = b.scalar("train/ffm/zero", 0f32)?;
    let touched = b.op("Greater", "train/ffm/touched_b", &[&touched, &zero])?;
    let touched = b.op_typed(
        "Cast",
        "train/ffm/touched",
        &[&touched],
        "DstT",
        DataType::Float,
    )?;
    // Per feature.
    let dv = b.op("GatherNd", "train/ffm/d_v", &[&dvd, &p.at])?;
    let t = b.op("GatherNd", "train/ffm/touched_feature", &[&touched, &p.at])?;
    let t = b.op("ExpandDims", "train/ffm/touched3", &[&t, &axis2])?;
    let begin = b.vector("train/ffm/v_begin", &[0i64, 1])?;
    let size = b.vector("train/ffm/v_size", &[-1i64, -1])?;
    let v = b.op("Slice", "train/ffm/v_flat", &[&f.vals, &begin, &size])?;
    let vshape = b.vector("train/ffm/v_shape", &[-1i64, blocks, k])?;
    let v = b.op("Reshape", "train/ffm/v", &[&v, &vshape])?;
    let l2_3 = b.op("Reshape", "train/ffm/l2_3", &[l2f, &shape3])?;
    let l2v = b.op("Mul", "train/ffm/l2_v", &[&l2_3, &v])?;
    let l2v = b.op("Mul", "train/ffm/l2_touched", &[&l2v, &t])?;
    let gv = b.op("AddV2", "train/ffm/g_v3", &[&dv, &l2v])?;
    let flat = b.vector("train/ffm/g_v_shape", &[-1i64, blocks * k])?;
    let gv = b.op("Reshape", "train/ffm/g_v", &[&gv, &flat])?;
    // The weight: g sqrt(n) x + l2 w.
    let gr = match &p.sqrt_norm {
        Some(r) => b.op("Mul", "train/ffm/g_root", &[g, r])?,
        None => g.clone(),
    };
    let grf = b.gather("train/ffm/g_root_feature", &gr, &f.owner)?;
    let gx = b.op("Mul", "train/ffm/gx", &[&grf, &f.x])?;
    let begin = b.vector("train/ffm/w_begin", &[0i64, 0])?;
    let size = b.vector("train/ffm/w_size", &[-1i64, 1])?;
    let w = b.op("Slice", "train/ffm/w_column", &[&f.vals, &begin, &size])?;
    let flat1 = b.vector("train/ffm/flat", &[-1i64])?;
    let w = b.op("Reshape", "train/ffm/w", &[&w, &flat1])?;
    let l2w = b.op("Mul", "train/ffm/l2_w", &[l2f, &w])?;
    let gw = b.op("AddV2", "train/ffm/g_w", &[&gx, &l2w])?;
    let gw = b.op("ExpandDims", "train/ffm/g_w_column", &[&gw, &axis1])?;
    b.concat("train/ffm/g_rows", &[gw, gv], 1)
}

/// The embedding rows' gradients from the pooled vector's, `d_h` (`[B, dim]`): each row of an
/// instance gets it, divided by the instance's rows with mean pooling.
fn embedding_update(
    b: &mut Builder,
    t: &mut Trainer,
    f: &bow::Forward,
    d_h: &Output,
) -> Result<()> {
    let axis1 = b.scalar("train/rows_axis", 1i32)?;
    let mut d_rows = b.gather("train/d_rows_sum", d_h, &f.owner)?;
    if let Some(inverse) = &f.inverse_count {
        let scale = b.gather("train/row_scale", inverse, &f.owner)?;
        let scale = b.op("ExpandDims", "train/row_scale_column", &[&scale, &axis1])?;
        d_rows = b.op("Mul", "train/d_rows", &[&d_rows, &scale])?;
    }
    t.update("embedding", d_rows, Some(f.rows.clone()));
    Ok(())
}

/// The hierarchical softmax (`loss.rs`'s `Head::loss` with `hs`): the binary decisions on the
/// gold label's way from the root, each node's row updated with `sigmoid(z) - code` times the
/// pooled vector (sparse: the nodes of the way alone), the pooled vector's gradient through the
/// nodes' weights before their update.
fn hs_train(
    b: &mut Builder,
    t: &mut Trainer,
    m: &BowParts<'_>,
    f: &bow::Forward,
) -> Result<Vec<Output>> {
    use hogwild::models::Huffman;

    let cfg = m.config;
    let counts = m
        .label_counts
        .map(<[u64]>::to_vec)
        .unwrap_or_else(|| vec![1; cfg.classes]);
    let tree = Huffman::new(&counts);
    let paths = bow::HuffmanPaths::new(&tree);
    let codes: Vec<f32> = paths
        .second
        .iter()
        .map(|&second| f32::from(u8::from(second)))
        .collect();
    let (points, mask, dims) = (paths.points, paths.mask, paths.dims);
    let points = b.matrix("train/hs/points", &dims, &points)?;
    let codes = b.matrix("train/hs/codes", &dims, &codes)?;
    let mask = b.matrix("train/hs/mask", &dims, &mask)?;
    let label = b.input(&cfg.label_slot, DataType::Int64, &[-1])?;
    let axis0 = b.scalar("train/hs/axis0", 0i32)?;
    let axis1 = b.scalar("train/hs/axis1", 1i32)?;
    // [B, depth]: the gold's nodes, codes and mask, and its nodes' scores.
    let way = b.gather("train/hs/way", &points, &label)?;
    let target = b.gather("train/hs/target", &codes, &label)?;
    let on_way = b.gather("train/hs/on_way", &mask, &label)?;
    let axis1_64 = b.scalar("train/hs/axis1_64", 1i64)?;
    let z: Output = b
        .node(
            "GatherV2",
            "train/hs/z",
            &[&f.scores, &way, &axis1_64],
            |nd| nd.set_attr_int("batch_dims", 1),
        )?
        .into();
    let p = b.op("Sigmoid", "train/hs/p", &[&z])?;
    let g = b.op("Sub", "train/hs/g_all", &[&p, &target])?;
    let g = b.op("Mul", "train/hs/g", &[&g, &on_way])?;
    let relu = b.op("Relu", "train/hs/relu", &[&z])?;
    let zy = b.op("Mul", "train/hs/zy", &[&z, &target])?;
    let abs = b.op("Abs", "train/hs/abs", &[&z])?;
    let neg = b.op("Neg", "train/hs/neg_abs", &[&abs])?;
    let exp = b.op("Exp", "train/hs/exp", &[&neg])?;
    let log1p = b.op("Log1p", "train/hs/log1p", &[&exp])?;
    let l = b.op("Sub", "train/hs/relu_zy", &[&relu, &zy])?;
    let l = b.op("AddV2", "train/hs/logloss_all", &[&l, &log1p])?;
    let l = b.op("Mul", "train/hs/logloss", &[&l, &on_way])?;
    let per_instance = b.op("Sum", "train/hs/per_instance", &[&l, &axis1])?;
    let loss = b.op("Mean", "train/loss", &[&per_instance, &axis0])?;
    let probs = bow::hs_probabilities(b, &f.scores, &tree)?;
    let best: Output = b
        .node("ArgMax", "train/best", &[&probs, &axis1], |nd| {
            nd.set_attr_type("output_type", DataType::Int64)
        })?
        .into();
    let right = b.op("Equal", "train/right", &[&best, &label])?;
    let right = b.op_typed("Cast", "train/right_f", &[&right], "DstT", DataType::Float)?;
    let accuracy = b.op("Mean", "train/accuracy", &[&right, &axis0])?;
    let loss = b.output("loss", &loss, DataType::Float, &[])?;
    let accuracy = b.output("accuracy", &accuracy, DataType::Float, &[])?;

    // The nodes on the ways, flattened: their rows, gradients and instances.
    let flat = b.vector("train/hs/flat", &[-1i64])?;
    let mask_flat = b.op("Reshape", "train/hs/mask_flat", &[&on_way, &flat])?;
    let zero = b.scalar("train/hs/zero", 0f32)?;
    let valid = b.op("Greater", "train/hs/valid", &[&mask_flat, &zero])?;
    let at = b.where_true("train/hs/at", &valid)?;
    let way_flat = b.op("Reshape", "train/hs/way_flat", &[&way, &flat])?;
    let rows = b.gather("train/hs/rows", &way_flat, &at)?;
    let g_flat = b.op("Reshape", "train/hs/g_flat", &[&g, &flat])?;
    let g_rows = b.gather("train/hs/g_rows", &g_flat, &at)?;
    let start = b.scalar("train/hs/start", 0i64)?;
    let step = b.scalar("train/hs/step", 1i64)?;
    let every = b.op(
        "Range",
        "train/hs/instances",
        &[&start, &f.instances, &step],
    )?;
    let every = b.op("ExpandDims", "train/hs/instance_column", &[&every, &axis1])?;
    let tile = b.vector("train/hs/tile", &[1i64, dims[1] as i64])?;
    let owner = b.op("Tile", "train/hs/owner_grid", &[&every, &tile])?;
    let owner = b.op("Reshape", "train/hs/owner_flat", &[&owner, &flat])?;
    let owner = b.gather("train/hs/owner", &owner, &at)?;
    let g_col = b.op("ExpandDims", "train/hs/g_column", &[&g_rows, &axis1])?;
    // Each node's row: its gradient times the pooled vector and the bias input.
    let ones = b.op("OnesLike", "train/hs/instance_ones", &[&per_instance])?;
    let bias_in = if cfg.bias {
        ones
    } else {
        b.op("ZerosLike", "train/hs/no_bias", &[&ones])?
    };
    let bias_in = b.op("ExpandDims", "train/hs/bias_input", &[&bias_in, &axis1])?;
    let h_ext = b.concat("train/hs/hidden_ext", &[f.hidden.clone(), bias_in], 1)?;
    let h_rows = b.gather("train/hs/hidden_rows", &h_ext, &owner)?;
    let d_out = b.op("Mul", "train/hs/d_output", &[&h_rows, &g_col])?;
    let w_rows = b.gather("train/hs/weights_rows", &f.weights, &rows)?;
    let d_h_rows = b.op("Mul", "train/hs/d_hidden_rows", &[&w_rows, &g_col])?;
    let d_h = b.segment_sum("train/hs/d_hidden", &d_h_rows, &owner, &f.instances)?;
    t.update("output", d_out, Some(rows));
    embedding_update(b, t, f, &d_h)?;
    Ok(vec![loss, accuracy])
}
