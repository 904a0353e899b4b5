//! Writing a TensorFlow V2 checkpoint of named float tensors: a graph of its own, one placeholder
//! per tensor fed to a `SaveV2` op, so that the exported graph holds no copy of the weights and
//! the values never pass through a variable.

use std::path::Path;

use tensorflow::{DataType, Session, SessionOptions, SessionRunArgs, Tensor};

use super::graph::Builder;
use crate::graph::run_error;
use crate::{Error, Result};

/// A tensor to write, under the name its variable has in the graph.
pub(crate) struct Named {
    pub(crate) name: String,
    pub(crate) tensor: Value,
}

/// A checkpoint tensor: the weights and optimizer state, or a count.
pub(crate) enum Value {
    F32(Tensor<f32>),
    I64(Tensor<i64>),
}

impl Value {
    fn dtype(&self) -> DataType {
        match self {
            Value::F32(_) => DataType::Float,
            Value::I64(_) => DataType::Int64,
        }
    }
}

/// A scalar count.
pub(crate) fn count(name: &str, value: i64) -> Named {
    Named {
        name: name.to_string(),
        tensor: Value::I64(Tensor::from(value)),
    }
}

/// `rows` x `width` values, row-major, as a tensor (`width` 0 or 1 of a vector: `[rows]`).
pub(crate) fn matrix(name: &str, dims: &[u64], values: Vec<f32>) -> Result<Named> {
    let tensor = Tensor::new(dims)
        .with_values(&values)
        .map_err(|s| run_error(format!("making tensor {name}"), s))?;
    Ok(Named {
        name: name.to_string(),
        tensor: Value::F32(tensor),
    })
}

/// Writes `tensors` as the checkpoint of prefix `prefix` (`prefix.index`, `prefix.data-*`).
pub(crate) fn write(prefix: &Path, tensors: &[Named]) -> Result<()> {
    let during = || format!("writing checkpoint {}", prefix.display());
    let mut b = Builder::new();
    let filename = b.placeholder("filename", DataType::String, &[])?;
    let names: Vec<String> = tensors.iter().map(|t| t.name.clone()).collect();
    let names_c = b.vector("tensor_names", &names)?;
    let slices_c = b.vector("shape_and_slices", &vec![String::new(); tensors.len()])?;
    let mut feeds = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        feeds.push(b.placeholder_any(&format!("tensor_{i}"), t.tensor.dtype())?);
    }
    let save = {
        let mut nd = b
            .graph
            .new_operation("SaveV2", "save")
            .map_err(|e| run_error(during(), e.into()))?;
        nd.add_input(filename.clone());
        nd.add_input(names_c);
        nd.add_input(slices_c);
        nd.add_input_list(&feeds);
        let dtypes: Vec<DataType> = tensors.iter().map(|t| t.tensor.dtype()).collect();
        nd.set_attr_type_list("dtypes", &dtypes)
            .map_err(|s| run_error(during(), s.into()))?;
        nd.finish().map_err(|s| run_error(during(), s))?
    };
    let mut session =
        Session::new(&SessionOptions::new(), &b.graph).map_err(|s| run_error(during(), s))?;
    let prefix_text = prefix.to_str().ok_or_else(|| Error::BadOption {
        option: "-o",
        reason: format!("{} is not valid UTF-8", prefix.display()),
    })?;
    let prefix_t = Tensor::from(prefix_text.to_string());
    let mut args = SessionRunArgs::new();
    args.add_feed(&filename.operation, filename.index, &prefix_t);
    for (feed, t) in feeds.iter().zip(tensors) {
        match &t.tensor {
            Value::F32(v) => args.add_feed(&feed.operation, feed.index, v),
            Value::I64(v) => args.add_feed(&feed.operation, feed.index, v),
        }
    }
    args.add_target(&save);
    session.run(&mut args).map_err(|s| run_error(during(), s))?;
    session.close().map_err(|s| run_error(during(), s))
}
