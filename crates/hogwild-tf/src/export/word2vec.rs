//! A word2vec model's vectors as a lookup graph: a word (string) to its vector, the one
//! `hogwild export --format word2vec` writes for it (the word's row, or with subwords the mean of
//! its row and its n-grams' rows), through a hash table of the exported words that the
//! SavedModel's main op fills at load.

use hogwild::models::Word2Vec;
use tensorflow::DataType;

use super::checkpoint::{self, Named};
use super::graph::Builder;
use crate::Result;

/// What the export reads of a word2vec model.
pub struct Word2VecParts<'a> {
    /// The model: its vocabulary, the words `hogwild export --format word2vec` writes, and
    /// their vectors (with subwords, the mean of the word's and its n-grams' rows).
    pub model: &'a Word2Vec,
}

pub(crate) fn build(b: &mut Builder, m: &Word2VecParts<'_>) -> Result<Vec<Named>> {
    let model = m.model;
    let dim = model.config().dim;
    let ids = model.exported_ids();
    let words: Vec<String> = ids
        .iter()
        .map(|&i| model.vocab().words[i].clone())
        .collect();
    let mut values = vec![0f32; ids.len() * dim];
    for (row, &id) in values.chunks_exact_mut(dim.max(1)).zip(&ids) {
        model.word_vector(id, row);
    }
    let n = ids.len() as u64;

    let input = b.input("words", DataType::String, &[-1])?;
    let table: tensorflow::Output = b
        .node("HashTableV2", "vocabulary", &[], |nd| {
            nd.set_attr_type("key_dtype", DataType::String)?;
            nd.set_attr_type("value_dtype", DataType::Int64)?;
            nd.set_attr_string("shared_name", "vocabulary")
        })?
        .into();
    let keys = b.vector("vocabulary/words", &words)?;
    let rows: Vec<i64> = (0..ids.len() as i64).collect();
    let rows = b.vector("vocabulary/rows", &rows)?;
    let import = b.node(
        "LookupTableImportV2",
        "vocabulary/import",
        &[&table, &keys, &rows],
        |_| Ok::<(), tensorflow::Status>(()),
    )?;
    b.run_at_load(import);
    let missing = b.scalar("vocabulary/missing", -1i64)?;
    let row = b.op(
        "LookupTableFindV2",
        "lookup/row",
        &[&table, &input, &missing],
    )?;
    let zero = b.scalar("lookup/zero", 0i64)?;
    let known = b.op("GreaterEqual", "lookup/known", &[&row, &zero])?;
    let at = b.op("Maximum", "lookup/row_or_0", &[&row, &zero])?;
    let vectors = b.variable("vectors", &[n, dim as u64], false)?;
    let found = b.gather("lookup/found", &vectors, &at)?;
    // An unknown word's vector is zero (`known` tells it apart).
    let scale = b.op_typed("Cast", "lookup/known_f", &[&known], "DstT", DataType::Float)?;
    let axis = b.scalar("lookup/column", 1i32)?;
    let scale = b.op("ExpandDims", "lookup/known_column", &[&scale, &axis])?;
    let vectors_out = b.op("Mul", "lookup/vectors", &[&found, &scale])?;
    b.output("vectors", &vectors_out, DataType::Float, &[-1, dim as i64])?;
    b.output("known", &known, DataType::Bool, &[-1])?;
    Ok(vec![checkpoint::matrix(
        "vectors",
        &[n, dim as u64],
        values,
    )?])
}
