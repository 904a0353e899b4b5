//! A small graph builder over the `tensorflow` crate's `Graph`: ops named by what they compute,
//! resource variables with the `variables` collection `tf.compat.v1` writes, ragged inputs in the
//! runner's convention, a V2 saver, and the MetaGraphDef of the whole. The model builders
//! (`bow.rs`, `ctr.rs`, `word2vec.rs`) use it so that they read like the models they mirror.

use std::collections::HashMap;

use prost::Message;
use tensorflow::{
    DataType, Graph, Operation, OperationDescription, Output, Shape, Status, Tensor, TensorType,
};

use crate::graph::run_error;
use crate::proto::{
    BytesList, CollectionDef, Dim, MetaGraphDef, MetaInfoDef, NodeList, SaverDef, SignatureDef,
    TensorInfo, TensorShapeProto, VariableDef,
};
use crate::Result;

/// The `DataType` enum value of the types the exporter's signatures use.
pub(crate) fn dtype_number(dtype: DataType) -> i32 {
    match dtype {
        DataType::Float => 1,
        DataType::Int32 => 3,
        DataType::String => 7,
        DataType::Int64 => 9,
        DataType::Bool => 10,
        DataType::UInt64 => 23,
        _ => 0,
    }
}

/// A resource variable: its handle op and what its `VariableDef` names.
#[derive(Clone, Debug)]
pub(crate) struct Var {
    pub(crate) name: String,
    pub(crate) handle: Output,
    pub(crate) dtype: DataType,
    initializer: String,
    snapshot: String,
    initial: String,
    trainable: bool,
}

/// A slot fed as the runner feeds it: `values` (`[N]`) and `row_splits` (`[B+1]`, int64), with
/// each value's instance (`segments`, `[N]`) and the number of instances (`rows`, a scalar).
#[derive(Clone, Debug)]
pub(crate) struct Ragged {
    pub(crate) values: Output,
    pub(crate) splits: Output,
    pub(crate) segments: Output,
    pub(crate) rows: Output,
}

/// The graph being built, its variables and the signature's tensors.
pub(crate) struct Builder {
    pub(crate) graph: Graph,
    used: HashMap<String, usize>,
    pub(crate) vars: Vec<Var>,
    inputs: Vec<(String, TensorInfo)>,
    outputs: Vec<(String, TensorInfo)>,
    /// Ops that must run once before the signature (lookup tables' imports).
    init: Vec<Operation>,
    /// For a parameter-server cluster: the number of ps tasks, and the task of each table (a
    /// variable's name up to its first `/`), given round-robin as tables appear; a table's
    /// optimizer state sits with it, where its apply ops run.
    pub(crate) ps_tasks: usize,
    placement: HashMap<String, usize>,
}

/// What went wrong while the graph was built: a bug of the exporter, named by the op.
fn built(what: &str, status: impl Into<Status>) -> crate::Error {
    run_error(
        format!("building the exported graph ({what})"),
        status.into(),
    )
}

fn info(tensor: &Output, dtype: DataType, dims: &[i64]) -> Result<TensorInfo> {
    let name = tensor
        .operation
        .name()
        .map_err(|s| built("naming a signature tensor", s))?;
    Ok(TensorInfo {
        name: format!("{name}:{}", tensor.index),
        dtype: dtype_number(dtype),
        tensor_shape: Some(TensorShapeProto {
            dim: dims.iter().map(|&size| Dim { size }).collect(),
            unknown_rank: false,
        }),
        composite_tensor: None,
    })
}

impl Builder {
    pub(crate) fn new() -> Self {
        Self {
            graph: Graph::new(),
            used: HashMap::new(),
            vars: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            init: Vec::new(),
            ps_tasks: 0,
            placement: HashMap::new(),
        }
    }

    /// `name`, or `name_N` when an op of that name exists.
    fn unique(&mut self, name: &str) -> String {
        let n = self.used.entry(name.to_string()).or_insert(0);
        *n += 1;
        if *n == 1 {
            name.to_string()
        } else {
            format!("{name}_{}", *n - 1)
        }
    }

    /// Op `ty` named `name` (made unique) of `inputs`, its attributes set by `attrs`.
    pub(crate) fn node<E: Into<Status>>(
        &mut self,
        ty: &str,
        name: &str,
        inputs: &[&Output],
        attrs: impl FnOnce(&mut OperationDescription<'_>) -> std::result::Result<(), E>,
    ) -> Result<Operation> {
        let unique = self.unique(name);
        let mut nd = self
            .graph
            .new_operation(ty, &unique)
            .map_err(|e| built(&unique, e))?;
        for input in inputs {
            nd.add_input((*input).clone());
        }
        attrs(&mut nd).map_err(|s| built(&unique, s))?;
        nd.finish().map_err(|s| built(&unique, s))
    }

    /// [`Builder::node`] run only after `after`.
    pub(crate) fn node_after<E: Into<Status>>(
        &mut self,
        ty: &str,
        name: &str,
        inputs: &[&Output],
        after: &[Operation],
        attrs: impl FnOnce(&mut OperationDescription<'_>) -> std::result::Result<(), E>,
    ) -> Result<Operation> {
        self.node(ty, name, inputs, |nd| {
            for op in after {
                nd.add_control_input(op);
            }
            attrs(nd)
        })
    }

    /// The handle of variable `name`.
    pub(crate) fn handle(&self, name: &str) -> Result<Output> {
        self.vars
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.handle.clone())
            .ok_or_else(|| {
                built(
                    name,
                    Status::new_set_lossy(tensorflow::Code::NotFound, "no such variable"),
                )
            })
    }

    /// Every variable's initializer op.
    pub(crate) fn initializers(&self) -> Result<Vec<Operation>> {
        self.vars
            .iter()
            .map(|v| {
                self.graph
                    .operation_by_name_required(&v.initializer)
                    .map_err(|s| built(&v.initializer, s))
            })
            .collect()
    }

    /// Op `ty` with no attributes to set, its first output.
    pub(crate) fn op(&mut self, ty: &str, name: &str, inputs: &[&Output]) -> Result<Output> {
        Ok(self
            .node(ty, name, inputs, |_| Ok::<(), Status>(()))?
            .into())
    }

    /// Op `ty` with one type attribute, its first output.
    pub(crate) fn op_typed(
        &mut self,
        ty: &str,
        name: &str,
        inputs: &[&Output],
        attr: &str,
        dtype: DataType,
    ) -> Result<Output> {
        Ok(self
            .node(ty, name, inputs, |nd| nd.set_attr_type(attr, dtype))?
            .into())
    }

    /// A constant tensor.
    pub(crate) fn constant<T: TensorType>(
        &mut self,
        name: &str,
        value: Tensor<T>,
    ) -> Result<Output> {
        Ok(self
            .node("Const", name, &[], |nd| {
                nd.set_attr_type("dtype", T::data_type())?;
                nd.set_attr_tensor("value", value)
            })?
            .into())
    }

    pub(crate) fn scalar<T: TensorType>(&mut self, name: &str, value: T) -> Result<Output> {
        self.constant(
            name,
            Tensor::new(&[])
                .with_values(&[value])
                .map_err(|s| built(name, s))?,
        )
    }

    pub(crate) fn vector<T: TensorType>(&mut self, name: &str, values: &[T]) -> Result<Output> {
        let t = Tensor::new(&[values.len() as u64])
            .with_values(values)
            .map_err(|s| built(name, s))?;
        self.constant(name, t)
    }

    /// A constant of `dims` holding `values`, row-major.
    pub(crate) fn matrix<T: TensorType>(
        &mut self,
        name: &str,
        dims: &[u64],
        values: &[T],
    ) -> Result<Output> {
        let t = Tensor::new(dims)
            .with_values(values)
            .map_err(|s| built(name, s))?;
        self.constant(name, t)
    }

    pub(crate) fn placeholder(
        &mut self,
        name: &str,
        dtype: DataType,
        dims: &[i64],
    ) -> Result<Output> {
        let shape = Shape::from(Some(
            dims.iter()
                .map(|&d| (d >= 0).then_some(d))
                .collect::<Vec<_>>(),
        ));
        Ok(self
            .node("Placeholder", name, &[], |nd| {
                nd.set_attr_type("dtype", dtype)?;
                nd.set_attr_shape("shape", &shape)
            })?
            .into())
    }

    /// A placeholder of any shape.
    pub(crate) fn placeholder_any(&mut self, name: &str, dtype: DataType) -> Result<Output> {
        Ok(self
            .node("Placeholder", name, &[], |nd| {
                nd.set_attr_type("dtype", dtype)?;
                nd.set_attr_shape("shape", &Shape::from(None))
            })?
            .into())
    }

    /// Signature input `key` (a placeholder named by it).
    pub(crate) fn input(&mut self, key: &str, dtype: DataType, dims: &[i64]) -> Result<Output> {
        let p = self.placeholder(key, dtype, dims)?;
        self.inputs.push((key.to_string(), info(&p, dtype, dims)?));
        Ok(p)
    }

    /// Signature output `key`: `tensor` through an Identity named by the key.
    pub(crate) fn output(
        &mut self,
        key: &str,
        tensor: &Output,
        dtype: DataType,
        dims: &[i64],
    ) -> Result<Output> {
        let out = self.op("Identity", key, &[tensor])?;
        self.outputs
            .push((key.to_string(), info(&out, dtype, dims)?));
        Ok(out)
    }

    /// The slot `slot` as the runner feeds it (`slot` values of `dtype` and `slot/row_splits`),
    /// as signature inputs.
    pub(crate) fn ragged_input(&mut self, slot: &str, dtype: DataType) -> Result<Ragged> {
        let values = self.input(slot, dtype, &[-1])?;
        let splits = self.input(&format!("{slot}/row_splits"), DataType::Int64, &[-1])?;
        self.ragged(slot, values, splits)
    }

    /// Each value's instance and the number of instances of `values` split by `splits`.
    pub(crate) fn ragged(&mut self, slot: &str, values: Output, splits: Output) -> Result<Ragged> {
        let one = self.vector(&format!("{slot}/one"), &[1i64])?;
        let end = self.vector(&format!("{slot}/end"), &[0i64])?;
        let step = self.vector(&format!("{slot}/step"), &[1i64])?;
        // The ends of the rows: row_splits[1:].
        let ends = self.node(
            "StridedSlice",
            &format!("{slot}/ends"),
            &[&splits, &one, &end, &step],
            |nd| nd.set_attr_int("end_mask", 1),
        )?;
        let count = self.node("Size", &format!("{slot}/count"), &[&values], |nd| {
            nd.set_attr_type("out_type", DataType::Int64)
        })?;
        let zero = self.scalar(&format!("{slot}/zero"), 0i64)?;
        let delta = self.scalar(&format!("{slot}/delta"), 1i64)?;
        let positions = self.op(
            "Range",
            &format!("{slot}/positions"),
            &[&zero, &count.into(), &delta],
        )?;
        let row = self.vector(&format!("{slot}/row"), &[1i64, -1])?;
        let ends2 = self.op(
            "Reshape",
            &format!("{slot}/ends_row"),
            &[&ends.into(), &row],
        )?;
        let positions2 = self.op(
            "Reshape",
            &format!("{slot}/positions_row"),
            &[&positions, &row],
        )?;
        // A value's instance is the first row whose end is beyond it.
        let segments = self.node(
            "UpperBound",
            &format!("{slot}/instance_row"),
            &[&ends2, &positions2],
            |nd| nd.set_attr_type("out_type", DataType::Int64),
        )?;
        let flat = self.vector(&format!("{slot}/flat"), &[-1i64])?;
        let segments = self.op(
            "Reshape",
            &format!("{slot}/instance"),
            &[&segments.into(), &flat],
        )?;
        let splits_count =
            self.node("Size", &format!("{slot}/splits_count"), &[&splits], |nd| {
                nd.set_attr_type("out_type", DataType::Int64)
            })?;
        let rows = self.op(
            "Sub",
            &format!("{slot}/instances"),
            &[&splits_count.into(), &delta],
        )?;
        Ok(Ragged {
            values,
            splits,
            segments,
            rows,
        })
    }

    /// A float32 resource variable `name` of shape `dims` (zeros when initialised; the values
    /// come from the checkpoint), and the op reading it.
    pub(crate) fn variable(&mut self, name: &str, dims: &[u64], trainable: bool) -> Result<Output> {
        self.variable_of(name, dims, DataType::Float, trainable)
    }

    /// [`Builder::variable`] of any type.
    pub(crate) fn variable_of(
        &mut self,
        name: &str,
        dims: &[u64],
        dtype: DataType,
        trainable: bool,
    ) -> Result<Output> {
        let shape = Shape::from(Some(
            dims.iter().map(|&d| Some(d as i64)).collect::<Vec<_>>(),
        ));
        let device = self.device_of(name);
        let handle: Output = self
            .node("VarHandleOp", name, &[], |nd| {
                if let Some(device) = &device {
                    nd.set_device(device)?;
                }
                nd.set_attr_type("dtype", dtype)?;
                nd.set_attr_shape("shape", &shape)?;
                nd.set_attr_string("shared_name", name)?;
                nd.set_attr_string("container", "")
            })?
            .into();
        let dims_i: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let shape_c = self.vector(&format!("{name}/Initializer/shape"), &dims_i)?;
        let zero = match dtype {
            DataType::Int64 => self.scalar(&format!("{name}/Initializer/zero"), 0i64)?,
            _ => self.scalar(&format!("{name}/Initializer/zero"), 0f32)?,
        };
        let initial = self.op(
            "Fill",
            &format!("{name}/Initializer/zeros"),
            &[&shape_c, &zero],
        )?;
        let init = self.node(
            "AssignVariableOp",
            &format!("{name}/Assign"),
            &[&handle, &initial],
            |nd| nd.set_attr_type("dtype", dtype),
        )?;
        let snapshot = self.op_typed(
            "ReadVariableOp",
            &format!("{name}/Read/ReadVariableOp"),
            &[&handle],
            "dtype",
            dtype,
        )?;
        let tensor_name = |o: &Output| -> Result<String> {
            Ok(format!(
                "{}:{}",
                o.operation.name().map_err(|s| built("a variable", s))?,
                o.index
            ))
        };
        self.vars.push(Var {
            name: name.to_string(),
            handle: handle.clone(),
            dtype,
            initializer: init.name().map_err(|s| built("a variable", s))?,
            snapshot: tensor_name(&snapshot)?,
            initial: tensor_name(&initial)?,
            trainable,
        });
        Ok(snapshot)
    }

    /// The ps task variable `name` goes to, in a cluster graph.
    pub(crate) fn device_of(&mut self, name: &str) -> Option<String> {
        if self.ps_tasks == 0 {
            return None;
        }
        let table = name.split('/').next().unwrap_or(name).to_string();
        let next = self.placement.len() % self.ps_tasks;
        let task = *self.placement.entry(table).or_insert(next);
        Some(format!("/job:ps/task:{task}"))
    }

    /// The V2 saver of every variable (TensorFlow's `save/` ops): a checkpoint holds each
    /// variable under its name.
    fn saver(&mut self) -> Result<SaverDef> {
        let vars = self.vars.clone();
        let default_name = self.scalar("save/default_filename", String::from("model"))?;
        let filename: Output = self
            .node(
                "PlaceholderWithDefault",
                "save/filename",
                &[&default_name],
                |nd| {
                    nd.set_attr_type("dtype", DataType::String)?;
                    nd.set_attr_shape("shape", &Shape::from(Some(vec![])))
                },
            )?
            .into();
        let names: Vec<String> = vars.iter().map(|v| v.name.clone()).collect();
        let slices = vec![String::new(); vars.len()];
        let names_c = self.vector("save/tensor_names", &names)?;
        let slices_c = self.vector("save/shape_and_slices", &slices)?;
        let dtypes: Vec<DataType> = vars.iter().map(|v| v.dtype).collect();
        let mut reads = Vec::new();
        for v in &vars {
            reads.push(self.op_typed(
                "ReadVariableOp",
                &format!("save/read_{}", v.name),
                &[&v.handle],
                "dtype",
                v.dtype,
            )?);
        }
        let save = {
            let unique = self.unique("save/SaveV2");
            let mut nd = self
                .graph
                .new_operation("SaveV2", &unique)
                .map_err(|e| built(&unique, e))?;
            nd.add_input(filename.clone());
            nd.add_input(names_c.clone());
            nd.add_input(slices_c.clone());
            nd.add_input_list(&reads);
            nd.set_attr_type_list("dtypes", &dtypes)
                .map_err(|s| built(&unique, s))?;
            nd.finish().map_err(|s| built(&unique, s))?
        };
        let saved = {
            let unique = self.unique("save/control_dependency");
            let mut nd = self
                .graph
                .new_operation("Identity", &unique)
                .map_err(|e| built(&unique, e))?;
            nd.add_input(filename.clone());
            nd.add_control_input(&save);
            nd.finish().map_err(|s| built(&unique, s))?
        };
        let restore = self.node(
            "RestoreV2",
            "save/RestoreV2",
            &[&filename, &names_c, &slices_c],
            |nd| nd.set_attr_type_list("dtypes", &dtypes),
        )?;
        let mut assigns = Vec::new();
        for (i, v) in vars.iter().enumerate() {
            let value = Output {
                operation: restore.clone(),
                index: i as i32,
            };
            assigns.push(self.node(
                "AssignVariableOp",
                &format!("save/assign_{}", v.name),
                &[&v.handle, &value],
                |nd| nd.set_attr_type("dtype", v.dtype),
            )?);
        }
        self.group("save/restore_all", &assigns)?;
        Ok(SaverDef {
            filename_tensor_name: "save/filename:0".into(),
            save_tensor_name: format!("{}:0", saved.name().map_err(|s| built("save", s))?),
            restore_op_name: "save/restore_all".into(),
            max_to_keep: 5,
            sharded: false,
            keep_checkpoint_every_n_hours: 10000.0,
            version: 2,
        })
    }

    /// `ConcatV2` of `parts` along `axis`.
    pub(crate) fn concat(&mut self, name: &str, parts: &[Output], axis: i64) -> Result<Output> {
        if let [one] = parts {
            // ConcatV2 takes at least two.
            return self.op("Identity", name, &[one]);
        }
        let axis = self.scalar(&format!("{name}/axis"), axis)?;
        let unique = self.unique(name);
        let mut nd = self
            .graph
            .new_operation("ConcatV2", &unique)
            .map_err(|e| built(&unique, e))?;
        nd.add_input_list(parts);
        nd.add_input(axis);
        Ok(nd.finish().map_err(|s| built(&unique, s))?.into())
    }

    /// Rows `indices` of `params` (`GatherV2` on axis 0).
    pub(crate) fn gather(
        &mut self,
        name: &str,
        params: &Output,
        indices: &Output,
    ) -> Result<Output> {
        let axis = self.scalar(&format!("{name}/axis"), 0i64)?;
        self.op("GatherV2", name, &[params, indices, &axis])
    }

    /// The positions where `cond` (a bool vector) holds, as an int64 vector.
    pub(crate) fn where_true(&mut self, name: &str, cond: &Output) -> Result<Output> {
        let at = self.op("Where", &format!("{name}/where"), &[cond])?;
        let flat = self.vector(&format!("{name}/flat"), &[-1i64])?;
        self.op("Reshape", name, &[&at, &flat])
    }

    /// `x[begin:end]` of a vector (`end` None: to its end; a negative `end` counts from it).
    pub(crate) fn slice(
        &mut self,
        name: &str,
        x: &Output,
        begin: i64,
        end: Option<i64>,
    ) -> Result<Output> {
        let b = self.vector(&format!("{name}/begin"), &[begin])?;
        let e = self.vector(&format!("{name}/end"), &[end.unwrap_or(0)])?;
        let s = self.vector(&format!("{name}/strides"), &[1i64])?;
        Ok(self
            .node("StridedSlice", name, &[x, &b, &e, &s], |nd| {
                nd.set_attr_int("end_mask", i64::from(end.is_none()))
            })?
            .into())
    }

    /// The sum of the rows of `data` of each of `count` segments (`UnsortedSegmentSum`).
    pub(crate) fn segment_sum(
        &mut self,
        name: &str,
        data: &Output,
        segments: &Output,
        count: &Output,
    ) -> Result<Output> {
        self.op("UnsortedSegmentSum", name, &[data, segments, count])
    }

    /// `x` once `cond` (a bool vector) holds everywhere; otherwise running it fails with
    /// `message`.
    pub(crate) fn checked(
        &mut self,
        name: &str,
        x: &Output,
        cond: &Output,
        message: &str,
    ) -> Result<Output> {
        let zero = self.scalar(&format!("{name}/axis"), 0i32)?;
        let all = self.op("All", &format!("{name}/all"), &[cond, &zero])?;
        let text = self.scalar(&format!("{name}/message"), message.to_string())?;
        let data = [text];
        let unique = self.unique(&format!("{name}/assert"));
        let assert = {
            let mut nd = self
                .graph
                .new_operation("Assert", &unique)
                .map_err(|e| built(&unique, e))?;
            nd.add_input(all);
            nd.add_input_list(&data);
            nd.set_attr_type_list("T", &[DataType::String])
                .map_err(|s| built(&unique, s))?;
            nd.finish().map_err(|s| built(&unique, s))?
        };
        let unique = self.unique(name);
        let mut nd = self
            .graph
            .new_operation("Identity", &unique)
            .map_err(|e| built(&unique, e))?;
        nd.add_input(x.clone());
        nd.add_control_input(&assert);
        Ok(nd.finish().map_err(|s| built(&unique, s))?.into())
    }

    /// Has `op` run once when the graph is loaded (the SavedModel's main op).
    pub(crate) fn run_at_load(&mut self, op: Operation) {
        self.init.push(op);
    }

    /// The name of the op that runs every [`Builder::run_at_load`] op, if any.
    pub(crate) fn init_ops(&mut self) -> Option<String> {
        if self.init.is_empty() {
            return None;
        }
        let ops = self.init.clone();
        let op = self.group("init_all_tables", &ops).ok()?;
        op.name().ok()
    }

    /// A NoOp named `name` that runs `ops`.
    pub(crate) fn group(&mut self, name: &str, ops: &[Operation]) -> Result<Operation> {
        let unique = self.unique(name);
        let mut nd = self
            .graph
            .new_operation("NoOp", &unique)
            .map_err(|e| built(&unique, e))?;
        for op in ops {
            nd.add_control_input(op);
        }
        nd.finish().map_err(|s| built(&unique, s))
    }

    /// The MetaGraphDef of the graph: its saver, the `variables` (and `trainable_variables`)
    /// collections, `collections` of node names, and the signature `signature` of the inputs
    /// and outputs declared, of method `method`.
    pub(crate) fn meta_graph(
        mut self,
        tags: &[&str],
        signature: &str,
        method: &str,
        collections: &[(&str, Vec<String>)],
    ) -> Result<MetaGraphDef> {
        let saver_def = self.saver()?;
        let var_def = |v: &Var| {
            VariableDef {
                variable_name: format!("{}:0", v.name),
                initializer_name: v.initializer.clone(),
                snapshot_name: v.snapshot.clone(),
                is_resource: true,
                initial_value_name: v.initial.clone(),
                trainable: v.trainable,
            }
            .encode_to_vec()
        };
        let bytes = |value: Vec<Vec<u8>>| CollectionDef {
            node_list: None,
            bytes_list: Some(BytesList { value }),
        };
        let mut collection_def = HashMap::new();
        collection_def.insert(
            "variables".to_string(),
            bytes(self.vars.iter().map(var_def).collect()),
        );
        let trainable: Vec<Vec<u8>> = self
            .vars
            .iter()
            .filter(|v| v.trainable)
            .map(var_def)
            .collect();
        if !trainable.is_empty() {
            collection_def.insert("trainable_variables".to_string(), bytes(trainable));
        }
        for (key, nodes) in collections {
            collection_def.insert(
                key.to_string(),
                CollectionDef {
                    node_list: Some(NodeList {
                        value: nodes.clone(),
                    }),
                    bytes_list: None,
                },
            );
        }
        let mut signature_def = HashMap::new();
        signature_def.insert(
            signature.to_string(),
            SignatureDef {
                inputs: self.inputs.iter().cloned().collect(),
                outputs: self.outputs.iter().cloned().collect(),
                method_name: method.to_string(),
            },
        );
        let graph_def = self
            .graph
            .graph_def()
            .map_err(|s| built("serializing the graph", s))?;
        Ok(MetaGraphDef {
            meta_info_def: Some(MetaInfoDef {
                tags: tags.iter().map(|t| t.to_string()).collect(),
                tensorflow_version: crate::tensorflow_version(),
            }),
            graph_def,
            saver_def: Some(saver_def),
            collection_def,
            signature_def,
            object_graph_def: None,
        })
    }
}
