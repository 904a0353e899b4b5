//! `hogwild export`: a saved word2vec model's vectors in word2vec's text format.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args as ClapArgs;

use crate::models::AnyModel;
use crate::paths;
use crate::say;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// A word2vec model saved by `hogwild train --save`.
    #[arg(long)]
    pub model: PathBuf,
    /// Where to write the vectors (`count dim` header, then `word v1 ... v_dim` per line; gensim's
    /// `KeyedVectors.load_word2vec_format` reads it; `-`: standard output).
    #[arg(long, short)]
    pub output: PathBuf,
}

pub fn run(args: Args) -> Result<()> {
    let (_, model) = crate::models::load(&args.model)?;
    let AnyModel::Word2vecSgd(m) = &model else {
        bail!(
            "{}: only word2vec models have word vectors to export",
            args.model.display()
        );
    };
    paths::refuse_overwrite(&args.output, "the output", [args.model.as_path()])?;
    let to_stdout = paths::is_stdio(&args.output);
    let mut out = paths::output(&args.output, to_stdout)?;
    let n = m.write_text(&mut out)?;
    let name = out.name().to_string();
    out.commit()?;
    say!(
        to_stdout,
        "wrote {n} vectors of {} to {name}",
        m.config().dim
    );
    Ok(())
}
