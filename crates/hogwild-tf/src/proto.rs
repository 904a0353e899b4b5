//! The few TensorFlow protobuf messages the runner and the exporter read or write, declared with
//! `prost` (the `tensorflow` crate keeps its generated protos private). Only the fields used are
//! declared; prost skips the others when decoding. Field numbers are those of
//! tensorflow/core/protobuf/ saved_model.proto, meta_graph.proto, saver.proto, config.proto,
//! cluster.proto, tensorflow_server.proto and tensorflow/core/framework/variable.proto.

use std::collections::HashMap;

/// `SavedModel`: the file `saved_model.pb` of a SavedModel directory.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SavedModel {
    #[prost(int64, tag = "1")]
    pub saved_model_schema_version: i64,
    #[prost(message, repeated, tag = "2")]
    pub meta_graphs: Vec<MetaGraphDef>,
}

/// `MetaGraphDef.MetaInfoDef`: the tags (which the runner reads) and the TensorFlow version (which
/// the exporter writes).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaInfoDef {
    #[prost(string, repeated, tag = "4")]
    pub tags: Vec<String>,
    #[prost(string, tag = "5")]
    pub tensorflow_version: String,
}

/// `MetaGraphDef`: the graph plus the names the runner needs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaGraphDef {
    #[prost(message, optional, tag = "1")]
    pub meta_info_def: Option<MetaInfoDef>,
    /// The serialized `GraphDef`, kept as bytes and handed to TensorFlow as is.
    #[prost(bytes = "vec", tag = "2")]
    pub graph_def: Vec<u8>,
    #[prost(message, optional, tag = "3")]
    pub saver_def: Option<SaverDef>,
    #[prost(map = "string, message", tag = "4")]
    pub collection_def: HashMap<String, CollectionDef>,
    #[prost(map = "string, message", tag = "5")]
    pub signature_def: HashMap<String, SignatureDef>,
    /// The `SavedObjectGraph` of a TF2 SavedModel (kept as bytes: only its presence is read).
    #[prost(bytes = "vec", optional, tag = "7")]
    pub object_graph_def: Option<Vec<u8>>,
}

/// `SaverDef`: the tensors and op of a `tf.compat.v1.train.Saver` (the runner reads the first three;
/// the exporter writes a V2 saver's whole definition).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SaverDef {
    #[prost(string, tag = "1")]
    pub filename_tensor_name: String,
    #[prost(string, tag = "2")]
    pub save_tensor_name: String,
    #[prost(string, tag = "3")]
    pub restore_op_name: String,
    #[prost(int32, tag = "4")]
    pub max_to_keep: i32,
    #[prost(bool, tag = "5")]
    pub sharded: bool,
    #[prost(float, tag = "6")]
    pub keep_checkpoint_every_n_hours: f32,
    /// `CheckpointFormatVersion`: 2 is V2 (an index file and data shards).
    #[prost(int32, tag = "7")]
    pub version: i32,
}

/// `CollectionDef`: a list of node names (what the runner reads) or of serialized messages (the
/// `variables` collection the exporter writes).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CollectionDef {
    #[prost(message, optional, tag = "1")]
    pub node_list: Option<NodeList>,
    #[prost(message, optional, tag = "2")]
    pub bytes_list: Option<BytesList>,
}

/// `CollectionDef.NodeList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeList {
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

/// `CollectionDef.BytesList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

/// `VariableDef` of a resource variable, as `tf.compat.v1` writes it into the `variables`
/// collection (what `import_meta_graph` and `tf.saved_model.load` rebuild variables from).
#[derive(Clone, PartialEq, prost::Message)]
pub struct VariableDef {
    #[prost(string, tag = "1")]
    pub variable_name: String,
    #[prost(string, tag = "2")]
    pub initializer_name: String,
    #[prost(string, tag = "3")]
    pub snapshot_name: String,
    #[prost(bool, tag = "5")]
    pub is_resource: bool,
    #[prost(string, tag = "6")]
    pub initial_value_name: String,
    #[prost(bool, tag = "7")]
    pub trainable: bool,
}

/// `SignatureDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SignatureDef {
    #[prost(map = "string, message", tag = "1")]
    pub inputs: HashMap<String, TensorInfo>,
    #[prost(map = "string, message", tag = "2")]
    pub outputs: HashMap<String, TensorInfo>,
    #[prost(string, tag = "3")]
    pub method_name: String,
}

/// `TensorInfo`: a dense tensor's `name`, or a composite tensor's components (the cases of a
/// oneof, each with the wire format of a plain field).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorInfo {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "5")]
    pub composite_tensor: Option<CompositeTensor>,
    /// A `DataType` enum value (1 float, 9 int64).
    #[prost(int32, tag = "2")]
    pub dtype: i32,
    #[prost(message, optional, tag = "3")]
    pub tensor_shape: Option<TensorShapeProto>,
}

/// `TensorInfo.CompositeTensor`: e.g. a `tf.RaggedTensor`'s flat values and row splits.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompositeTensor {
    #[prost(message, optional, tag = "1")]
    pub type_spec: Option<TypeSpecProto>,
    #[prost(message, repeated, tag = "2")]
    pub components: Vec<TensorInfo>,
}

/// `TypeSpecProto`, of which only the class name is read (`RaggedTensorSpec`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeSpecProto {
    #[prost(string, tag = "3")]
    pub type_spec_class_name: String,
}

/// `TensorShapeProto`: -1 for a dimension of unknown size.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<Dim>,
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

/// `TensorShapeProto.Dim`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dim {
    #[prost(int64, tag = "1")]
    pub size: i64,
}

/// `ConfigProto`: the session's thread pools and, in a cluster, the tasks it uses and its
/// deadline.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigProto {
    #[prost(int32, tag = "2")]
    pub intra_op_parallelism_threads: i32,
    /// Only these devices (e.g. `/job:ps`, `/job:worker/task:1`) are seen by the session: the
    /// master neither waits for nor places ops on other tasks.
    #[prost(string, repeated, tag = "4")]
    pub device_filters: Vec<String>,
    #[prost(int32, tag = "5")]
    pub inter_op_parallelism_threads: i32,
    /// The deadline of every blocking call of the session (creating it on the master included)
    /// that sets none of its own; 0: none.
    #[prost(int64, tag = "11")]
    pub operation_timeout_in_ms: i64,
    #[prost(message, optional, tag = "13")]
    pub rpc_options: Option<RpcOptions>,
}

/// `RPCOptions`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcOptions {
    /// Talk to an in-process master over gRPC too, so that every call has a gRPC deadline.
    #[prost(bool, tag = "1")]
    pub use_rpc_for_inprocess_master: bool,
}

/// `ServerDef`: the task an in-process server serves.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerDef {
    #[prost(message, optional, tag = "1")]
    pub cluster: Option<ClusterDef>,
    #[prost(string, tag = "2")]
    pub job_name: String,
    #[prost(int32, tag = "3")]
    pub task_index: i32,
    /// The configuration of the sessions the server's master creates and of its executors.
    #[prost(message, optional, tag = "4")]
    pub default_session_config: Option<ConfigProto>,
    /// `"grpc"`.
    #[prost(string, tag = "5")]
    pub protocol: String,
}

/// `ClusterDef`: every job of the cluster.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClusterDef {
    #[prost(message, repeated, tag = "1")]
    pub job: Vec<JobDef>,
}

/// `JobDef`: a job's tasks by index, each a `host:port`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct JobDef {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(map = "int32, string", tag = "2")]
    pub tasks: HashMap<i32, String>,
}

/// `RunOptions`: `inter_op_thread_pool = -1` runs a step's ops in the calling thread.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RunOptions {
    #[prost(int32, tag = "3")]
    pub inter_op_thread_pool: i32,
}

/// `DataType` values the runner feeds and fetches.
pub const DT_FLOAT: i32 = 1;
/// `DataType` of 32-bit integers.
pub const DT_INT32: i32 = 3;
/// `DataType` of 64-bit integers.
pub const DT_INT64: i32 = 9;

/// The `DataType` name as TensorFlow prints it.
pub fn dtype_name(dtype: i32) -> String {
    match dtype {
        1 => "float32".into(),
        2 => "float64".into(),
        3 => "int32".into(),
        7 => "string".into(),
        9 => "int64".into(),
        10 => "bool".into(),
        other => format!("DataType {other}"),
    }
}
