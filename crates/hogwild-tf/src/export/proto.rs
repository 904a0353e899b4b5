//! The protobuf messages of a SavedModel and of a MetaGraphDef as the exporter writes them,
//! declared with `prost` (the `tensorflow` crate keeps its generated protos private). Only the
//! fields written are declared; field numbers are those of tensorflow/core/protobuf/
//! saved_model.proto, meta_graph.proto, saver.proto and tensorflow/core/framework/variable.proto.

use std::collections::HashMap;

/// `SavedModel`: the schema version and the meta graphs (one, tagged `serve`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SavedModel {
    #[prost(int64, tag = "1")]
    pub saved_model_schema_version: i64,
    #[prost(message, repeated, tag = "2")]
    pub meta_graphs: Vec<MetaGraphDef>,
}

/// `MetaGraphDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaGraphDef {
    #[prost(message, optional, tag = "1")]
    pub meta_info_def: Option<MetaInfoDef>,
    /// The serialized `GraphDef`, as the `tensorflow` crate writes it.
    #[prost(bytes = "vec", tag = "2")]
    pub graph_def: Vec<u8>,
    #[prost(message, optional, tag = "3")]
    pub saver_def: Option<SaverDef>,
    #[prost(map = "string, message", tag = "4")]
    pub collection_def: HashMap<String, CollectionDef>,
    #[prost(map = "string, message", tag = "5")]
    pub signature_def: HashMap<String, SignatureDef>,
}

/// `MetaGraphDef.MetaInfoDef`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaInfoDef {
    #[prost(string, repeated, tag = "4")]
    pub tags: Vec<String>,
    #[prost(string, tag = "5")]
    pub tensorflow_version: String,
}

/// `SaverDef` of a V2 checkpoint saver.
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

/// `CollectionDef`: a list of node names or of serialized messages.
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

/// `TensorInfo` of a dense tensor.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorInfo {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int32, tag = "2")]
    pub dtype: i32,
    #[prost(message, optional, tag = "3")]
    pub tensor_shape: Option<TensorShapeProto>,
}

/// `TensorShapeProto`: -1 for a dimension of unknown size.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<Dim>,
}

/// `TensorShapeProto.Dim`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Dim {
    #[prost(int64, tag = "1")]
    pub size: i64,
}
