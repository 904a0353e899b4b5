//! A TensorFlow checkpoint of an exported training graph (`hogwild export --format tf-train`,
//! trained on by `hogwild tf-train`) read back into a native model's tables: each table's
//! weights, optimizer slots and scalars under the names the export gave them
//! ([`crate::export::state_names`]).

use std::path::Path;

use hogwild::models::OptimizerConfig;
use hogwild::Table;
use tensorflow::{DataType, Graph, Operation, Session, SessionOptions, SessionRunArgs, Tensor};

use crate::export::state_names;
use crate::graph::run_error;
use crate::{Error, Result};

/// Reads the float tensors `names` of the checkpoint at `prefix`.
fn read(prefix: &Path, names: &[String]) -> Result<Vec<Tensor<f32>>> {
    let during = || format!("reading checkpoint {}", prefix.display());
    let err = |s: tensorflow::Status| run_error(during(), s);
    let mut graph = Graph::new();
    let constant = |graph: &mut Graph, name: &str, values: Tensor<String>| -> Result<Operation> {
        let mut nd = graph
            .new_operation("Const", name)
            .map_err(|e| err(e.into()))?;
        nd.set_attr_type("dtype", DataType::String)
            .map_err(|e| err(e.into()))?;
        nd.set_attr_tensor("value", values).map_err(err)?;
        nd.finish().map_err(err)
    };
    let text = prefix.to_str().ok_or_else(|| Error::BadOption {
        option: "--tf-checkpoint",
        reason: format!("{} is not valid UTF-8", prefix.display()),
    })?;
    let filename = constant(&mut graph, "filename", Tensor::from(text.to_string()))?;
    let n = names.len() as u64;
    let names_t = Tensor::new(&[n]).with_values(names).map_err(err)?;
    let tensor_names = constant(&mut graph, "tensor_names", names_t)?;
    let slices = Tensor::new(&[n])
        .with_values(&vec![String::new(); names.len()])
        .map_err(err)?;
    let slices = constant(&mut graph, "shape_and_slices", slices)?;
    let restore = {
        let mut nd = graph
            .new_operation("RestoreV2", "restore")
            .map_err(|e| err(e.into()))?;
        nd.add_input(filename);
        nd.add_input(tensor_names);
        nd.add_input(slices);
        nd.set_attr_type_list("dtypes", &vec![DataType::Float; names.len()])
            .map_err(|e| err(e.into()))?;
        nd.finish().map_err(err)?
    };
    let mut session = Session::new(&SessionOptions::new(), &graph).map_err(err)?;
    let mut args = SessionRunArgs::new();
    let tokens: Vec<_> = (0..names.len())
        .map(|i| args.request_fetch(&restore, i as i32))
        .collect();
    session.run(&mut args).map_err(err)?;
    let out = tokens
        .into_iter()
        .map(|t| args.fetch::<f32>(t).map_err(err))
        .collect::<Result<Vec<_>>>()?;
    session.close().map_err(err)?;
    Ok(out)
}

/// Overwrites `tables` (weights, slots, scalars) with the checkpoint's values at `prefix`, read
/// under the names [`export::state_names`](crate::export::state_names) gives for `optimizer`
/// (the one the tables were made with). Every tensor is float32 and must have its table's
/// shape, `[rows, dim]` (a scalar `[]` for the optimizer's scalars).
///
/// # Errors
///
/// [`Error::Run`] for a checkpoint TensorFlow cannot read or that lacks a tensor,
/// [`Error::BadGraph`] naming a tensor of the wrong shape, [`Error::BadOption`]
/// (`--tf-checkpoint`) for a prefix that is not UTF-8. A table may already be overwritten when
/// a later one fails.
pub fn import_checkpoint(
    tables: &[&Table],
    optimizer: &OptimizerConfig,
    prefix: &Path,
) -> Result<()> {
    for table in tables {
        let (slots, scalars) = state_names(table.name(), optimizer);
        let mut names = vec![table.name().to_string()];
        names.extend(slots.iter().cloned());
        names.extend(scalars.iter().cloned());
        let tensors = read(prefix, &names)?;
        let (rows, dim) = (table.rows(), table.dim());
        let bad = |name: &str, dims: &[u64], want: &[u64]| Error::BadGraph {
            path: prefix.to_path_buf(),
            reason: format!(
                "tensor \"{name}\" has shape {dims:?}, but the model's table \"{}\" needs {want:?}",
                table.name()
            ),
        };
        let want = [rows as u64, dim as u64];
        for (name, t) in names.iter().zip(&tensors).take(1 + slots.len()) {
            if t.dims() != want {
                return Err(bad(name, t.dims(), &want));
            }
        }
        for (name, t) in names.iter().zip(&tensors).skip(1 + slots.len()) {
            if !t.dims().is_empty() {
                return Err(bad(name, t.dims(), &[]));
            }
        }
        let mut row = vec![0f32; table.stride()];
        for r in 0..rows {
            for (k, t) in tensors.iter().take(1 + slots.len()).enumerate() {
                row[k * dim..(k + 1) * dim].copy_from_slice(&t[r * dim..(r + 1) * dim]);
            }
            table.write_row(r, &row);
        }
        if !scalars.is_empty() {
            let values: Vec<f32> = tensors[1 + slots.len()..].iter().map(|t| t[0]).collect();
            table.set_scalars(&values)?;
        }
    }
    Ok(())
}
