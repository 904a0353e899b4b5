//! `hogwild word-vectors`: the vectors of any words, known or not, from a word2vec model trained
//! with subwords (`minn`, `maxn`, `subword_buckets`), as fastText's `print-word-vectors` gives
//! them: a word of the vocabulary has the vector `hogwild export` writes for it (the mean of its
//! row and its character n-grams' rows); another word, a misspelled or unseen one, has the mean
//! of its n-grams' rows, zero when it has no n-gram of `minn` to `maxn` characters. Each word
//! gets a line of word2vec's text format (`word v1 ... v_dim`, the lines of `hogwild export`).

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use hogwild::models::{vector_line, Word2Vec};

use crate::models::AnyModel;
use crate::paths;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// A word2vec model trained with subwords (`minn`, `maxn`, `subword_buckets`), saved by
    /// `hogwild train --save`.
    #[arg(long)]
    pub model: PathBuf,
    /// The words, each on its own. None: every word of standard input (separated by white
    /// space, as fastText's print-word-vectors reads them).
    #[arg(value_name = "WORD")]
    pub words: Vec<String>,
}

pub fn run(args: Args) -> Result<()> {
    paths::check_inputs("--model", [args.model.as_path()])?;
    if let Some(bad) = args
        .words
        .iter()
        .find(|w| w.is_empty() || w.contains(|c: char| c.is_ascii_whitespace()))
    {
        bail!("WORD {bad:?}: a word is one or more characters without white space");
    }
    let (_, model) = crate::models::load(&args.model)?;
    let AnyModel::Word2vecSgd(m) = &model else {
        bail!(
            "{}: only word2vec models have word vectors",
            args.model.display()
        );
    };
    if m.subwords().is_none() {
        bail!(
            "{}: the model has no subwords (it was trained without minn, maxn and \
             subword_buckets): only its vocabulary's words have vectors, which `hogwild export` \
             writes",
            args.model.display()
        );
    }
    let mut vectors = Vectors::new(m);
    let mut out = BufWriter::new(std::io::stdout().lock());
    if !args.words.is_empty() {
        for word in &args.words {
            out.write_all(vectors.line(word).as_bytes())?;
        }
        out.flush()?;
        return Ok(());
    }
    paths::stdin_lines("words (Ctrl-D ends): ", |line, text, interactive| {
        let Ok(text) = text else {
            bail!("standard input line {line}: not UTF-8 text");
        };
        for word in text.split_ascii_whitespace() {
            out.write_all(vectors.line(word).as_bytes())?;
        }
        if interactive {
            out.flush()?;
        }
        Ok(())
    })?;
    out.flush()?;
    Ok(())
}

/// The vectors of a word2vec model with subwords, one word at a time.
struct Vectors<'a> {
    model: &'a Word2Vec,
    /// The ids of the words that have vectors of their own: those `export` writes.
    known: HashMap<&'a str, usize>,
    values: Vec<f32>,
    line: String,
}

impl<'a> Vectors<'a> {
    fn new(model: &'a Word2Vec) -> Self {
        let words = &model.vocab().words;
        let known = model
            .exported_ids()
            .into_iter()
            .map(|id| (words[id].as_str(), id))
            .collect();
        Self {
            model,
            known,
            values: vec![0.0; model.config().dim],
            line: String::new(),
        }
    }

    /// `word`'s line.
    fn line(&mut self, word: &str) -> &str {
        match self.known.get(word) {
            Some(&id) => self.model.word_vector(id, &mut self.values),
            None => {
                // A model with subwords (checked in `run`) gives every word its n-grams' mean.
                self.model.ngram_vector(word, &mut self.values);
            }
        }
        vector_line(&mut self.line, word, &self.values);
        &self.line
    }
}
