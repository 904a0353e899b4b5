//! `hogwild import`: a native model from the TensorFlow checkpoint of its exported training graph
//! (`hogwild export --format tf-train`, trained on by `hogwild tf-train --save PREFIX`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use hogwild::Model;

use crate::models::AnyModel;
use crate::paths;
use crate::with_model;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// The model the training graph was exported from: its configuration, tables and labels.
    #[arg(long)]
    pub model: PathBuf,
    /// The checkpoint prefix `hogwild tf-train --save` wrote (or the export's `DIR/ckpt`).
    #[arg(long)]
    pub tf_checkpoint: PathBuf,
    /// Where to save the native model (replaced only once whole).
    #[arg(long, short)]
    pub output: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    paths::refuse_overwrite(&args.output, "the output", [args.model.as_path()])?;
    let (config, model, epochs) = AnyModel::load_trained(&args.model)?;
    with_model!(&model, m => hogwild_tf::import_checkpoint(
        &m.tables(), &config.optimizer, &args.tf_checkpoint))
    .with_context(|| format!("importing {}", args.tf_checkpoint.display()))?;
    model.save(&args.output, epochs)?;
    println!(
        "saved {} with the weights of {}",
        args.output.display(),
        args.tf_checkpoint.display()
    );
    Ok(())
}
