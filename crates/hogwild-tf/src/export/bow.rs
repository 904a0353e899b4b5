//! The bag-of-words classifier (`hogwild::models::Bow`) as a serving graph: the same embedding
//! rows per instance (words, n-gram buckets, hashed bigrams of consecutive words, the end-of-text
//! row and the bigram of the last word and the end), pooled the same way, through the same output
//! layer and head (softmax, one sigmoid per label for `ova` and `ns`, the Huffman tree's path
//! products for `hs`).

use hogwild::models::{BowConfig, Huffman, Labels, Loss, Pool};
use hogwild::rng::FASTTEXT_NGRAM_MULT;
use hogwild::Table;
use tensorflow::{DataType, Output};

use super::checkpoint::{self, Named};
use super::graph::Builder;
use super::hash;
use crate::Result;

/// What the export reads of a bag-of-words model (`hogwild::models::Bow`), whatever its
/// optimizer.
pub struct BowParts<'a> {
    /// The settings the graph follows: words slot, vocabulary size, buckets, pooling, loss.
    pub config: &'a BowConfig,
    /// The embedding table (`Bow::embedding`): words, bigram buckets, the end-of-text row,
    /// n-gram buckets, `dim` floats each; the checkpoint's float32 `embedding`.
    pub embedding: &'a Table,
    /// The output table (`Bow::output`): one row per class (per inner node of the tree with
    /// `hs`), `dim` weights then the bias; the checkpoint's float32 `output`, `[rows, dim + 1]`.
    pub output: &'a Table,
    /// The label names, which become the `labels` output when the model has them.
    pub labels: &'a Labels,
    /// The label counts `hs` built its tree of.
    pub label_counts: Option<&'a [u64]>,
}

/// The row of the bigram bucket of word ids `a` and `b` (int64): `vocab + (a * MULT + b) %
/// buckets`, in uint64 arithmetic as `hogwild::rng::fasttext_bigram`.
fn bigram_rows(
    b: &mut Builder,
    name: &str,
    a: &Output,
    c: &Output,
    cfg: &BowConfig,
) -> Result<Output> {
    let ua = hash::to_u64(b, &format!("{name}/a"), a)?;
    let uc = hash::to_u64(b, &format!("{name}/b"), c)?;
    let mult = b.scalar(&format!("{name}/mult"), FASTTEXT_NGRAM_MULT)?;
    let x = b.op("Mul", &format!("{name}/ax"), &[&ua, &mult])?;
    let x = b.op("AddV2", &format!("{name}/hash"), &[&x, &uc])?;
    let buckets = b.scalar(&format!("{name}/buckets"), cfg.bigram_buckets as u64)?;
    let bucket = b.op("FloorMod", &format!("{name}/bucket"), &[&x, &buckets])?;
    let bucket = hash::to_i64(b, &format!("{name}/bucket_i64"), &bucket)?;
    let vocab = b.scalar(&format!("{name}/vocab"), cfg.vocab as i64)?;
    b.op("AddV2", name, &[&bucket, &vocab])
}

/// The tensors of the forward pass: each instance's rows and pooled vector, the output layer's
/// scores (before the head), and what the training graph's gradients need.
pub(crate) struct Forward {
    /// The number of instances (int64 scalar).
    pub(crate) instances: Output,
    /// Every embedding row an instance reads (int64 `[R]`) and its instance.
    pub(crate) rows: Output,
    pub(crate) owner: Output,
    /// With mean pooling: `1 / rows` of each instance (`[B]`, 0 without rows).
    pub(crate) inverse_count: Option<Output>,
    pub(crate) hidden: Output,
    /// The output table's weights without the bias column (`[out_rows, dim]`).
    pub(crate) weights: Output,
    pub(crate) scores: Output,
}

/// The forward pass up to the output layer's scores, reading variables `embedding` and
/// `output`.
pub(crate) fn forward(b: &mut Builder, m: &BowParts<'_>) -> Result<Forward> {
    let cfg = m.config;
    let (vocab, buckets) = (cfg.vocab as i64, cfg.bigram_buckets as i64);
    let end_of_text = i64::from(cfg.end_of_text);
    let words = b.ragged_input(&cfg.words_slot, DataType::Int64)?;
    let instances = words.rows.clone();

    // Every id is a word below `vocab` or an n-gram bucket after them.
    let limit = vocab + cfg.subword_buckets as i64;
    let zero = b.scalar("bow/zero", 0i64)?;
    let lim = b.scalar("bow/limit", limit)?;
    let low = b.op("GreaterEqual", "bow/id_at_least_0", &[&words.values, &zero])?;
    let high = b.op("Less", "bow/id_below_limit", &[&words.values, &lim])?;
    let ok = b.op("LogicalAnd", "bow/id_in_range", &[&low, &high])?;
    let message = match cfg.subword_buckets {
        0 => format!(
            "slot {}: a word id is out of range (vocab = {vocab})",
            cfg.words_slot
        ),
        n => format!(
            "slot {}: a word id is out of range (vocab = {vocab} words, then \
             subword_buckets = {n} n-gram buckets)",
            cfg.words_slot
        ),
    };
    let ids = b.checked("bow/ids", &words.values, &ok, &message)?;

    // Rows of the words and n-grams; the words alone (without n-grams) make the bigrams.
    let (rows, word_ids, word_instance) = if cfg.subword_buckets > 0 {
        let v = b.scalar("bow/vocab", vocab)?;
        let is_word = b.op("Less", "bow/is_word", &[&ids, &v])?;
        let shift = b.scalar("bow/subword_shift", buckets + end_of_text)?;
        let shifted = b.op("AddV2", "bow/subword_rows", &[&ids, &shift])?;
        let rows = b.op("SelectV2", "bow/word_rows", &[&is_word, &ids, &shifted])?;
        let at = b.where_true("bow/word_positions", &is_word)?;
        let w = b.gather("bow/words", &ids, &at)?;
        let s = b.gather("bow/words_instance", &words.segments, &at)?;
        (rows, w, s)
    } else {
        (ids.clone(), ids.clone(), words.segments.clone())
    };
    let mut parts = vec![rows];
    let mut owners = vec![words.segments.clone()];
    if buckets > 0 {
        // Consecutive words of one instance.
        let first = b.slice("bow/pair_first", &word_ids, 0, Some(-1))?;
        let second = b.slice("bow/pair_second", &word_ids, 1, None)?;
        let first_of = b.slice("bow/pair_first_instance", &word_instance, 0, Some(-1))?;
        let second_of = b.slice("bow/pair_second_instance", &word_instance, 1, None)?;
        let same = b.op("Equal", "bow/pair_in_instance", &[&first_of, &second_of])?;
        let at = b.where_true("bow/pairs", &same)?;
        let a = b.gather("bow/bigram_first", &first, &at)?;
        let c = b.gather("bow/bigram_second", &second, &at)?;
        let of = b.gather("bow/bigram_instance", &first_of, &at)?;
        parts.push(bigram_rows(b, "bow/bigram_rows", &a, &c, cfg)?);
        owners.push(of);
    }
    if cfg.end_of_text {
        let one = b.scalar("bow/one", 1i64)?;
        let every = b.op("Range", "bow/instances", &[&zero, &instances, &one])?;
        if buckets > 0 {
            // The bigram of each instance's last word and the end of text (word id `vocab`).
            let ones = b.op("OnesLike", "bow/word_ones", &[&word_instance])?;
            let counts = b.segment_sum("bow/word_counts", &ones, &word_instance, &instances)?;
            let ends = b.op_typed(
                "Cumsum",
                "bow/word_ends",
                &[&counts, &zero],
                "T",
                DataType::Int64,
            )?;
            let has = b.op("Greater", "bow/has_words", &[&counts, &zero])?;
            let with = b.where_true("bow/with_words", &has)?;
            let end = b.gather("bow/last_end", &ends, &with)?;
            let last_at = b.op("Sub", "bow/last_position", &[&end, &one])?;
            let last = b.gather("bow/last_word", &word_ids, &last_at)?;
            let end_word = b.op("OnesLike", "bow/end_ones", &[&last])?;
            let v = b.scalar("bow/end_word", vocab)?;
            let end_word = b.op("Mul", "bow/end_words", &[&end_word, &v])?;
            parts.push(bigram_rows(
                b,
                "bow/end_bigram_rows",
                &last,
                &end_word,
                cfg,
            )?);
            owners.push(with);
        }
        let end_row = b.scalar("bow/end_row", vocab + buckets)?;
        let ones = b.op("OnesLike", "bow/instance_ones", &[&every])?;
        parts.push(b.op("Mul", "bow/end_rows", &[&ones, &end_row])?);
        owners.push(every);
    }
    let rows = b.concat("bow/rows", &parts, 0)?;
    let owner = b.concat("bow/row_instance", &owners, 0)?;

    let emb_rows = m.embedding.rows() as u64;
    let dim = cfg.dim as u64;
    let emb = b.variable("embedding", &[emb_rows, dim], true)?;
    let vectors = b.gather("bow/vectors", &emb, &rows)?;
    let mut hidden = b.segment_sum("bow/sum", &vectors, &owner, &instances)?;
    let mut inverse_count = None;
    if cfg.pool == Pool::Mean {
        let ones = b.op_typed("OnesLike", "bow/row_ones", &[&owner], "T", DataType::Int64)?;
        let ones = b.op_typed("Cast", "bow/row_weight", &[&ones], "DstT", DataType::Float)?;
        let counts = b.segment_sum("bow/rows_per_instance", &ones, &owner, &instances)?;
        let one = b.op("OnesLike", "bow/one_per_instance", &[&counts])?;
        // An instance without rows keeps a zero vector, as natively.
        let inverse = b.op("DivNoNan", "bow/inverse_count", &[&one, &counts])?;
        let axis = b.scalar("bow/column", 1i32)?;
        let column = b.op("ExpandDims", "bow/inverse_column", &[&inverse, &axis])?;
        hidden = b.op("Mul", "bow/hidden", &[&hidden, &column])?;
        inverse_count = Some(inverse);
    }

    let out_rows = m.output.rows() as u64;
    let fc = b.variable("output", &[out_rows, dim + 1], true)?;
    let begin = b.vector("bow/weights_begin", &[0i64, 0])?;
    let size = b.vector("bow/weights_size", &[-1i64, dim as i64])?;
    let weights = b.op("Slice", "bow/weights", &[&fc, &begin, &size])?;
    let mut scores: Output = b
        .node("MatMul", "bow/scores", &[&hidden, &weights], |nd| {
            nd.set_attr_bool("transpose_b", true)
        })?
        .into();
    if cfg.bias {
        let begin = b.vector("bow/bias_begin", &[0i64, dim as i64])?;
        let size = b.vector("bow/bias_size", &[-1i64, 1])?;
        let bias = b.op("Slice", "bow/bias_column", &[&fc, &begin, &size])?;
        let flat = b.vector("bow/bias_flat", &[-1i64])?;
        let bias = b.op("Reshape", "bow/bias", &[&bias, &flat])?;
        scores = b.op("AddV2", "bow/scores_biased", &[&scores, &bias])?;
    }
    Ok(Forward {
        instances,
        rows,
        owner,
        inverse_count,
        hidden,
        weights,
        scores,
    })
}

/// The serving graph's signature and the tensors of its checkpoint.
pub(crate) fn build(b: &mut Builder, m: &BowParts<'_>) -> Result<Vec<Named>> {
    let cfg = m.config;
    let Forward {
        instances, scores, ..
    } = forward(b, m)?;
    let (emb_rows, out_rows, dim) = (
        m.embedding.rows() as u64,
        m.output.rows() as u64,
        cfg.dim as u64,
    );
    let classes = cfg.classes as i64;
    let probs = match cfg.loss {
        Loss::Softmax => b.op("Softmax", "bow/probabilities", &[&scores])?,
        Loss::Ova | Loss::Ns => b.op("Sigmoid", "bow/probabilities", &[&scores])?,
        Loss::Hs => {
            let counts = m
                .label_counts
                .map(<[u64]>::to_vec)
                .unwrap_or_else(|| vec![1; cfg.classes]);
            hs_probabilities(b, &scores, &Huffman::new(&counts))?
        }
    };
    b.output("probabilities", &probs, DataType::Float, &[-1, classes])?;
    if m.labels.names().is_some() {
        let names: Vec<String> = (0..cfg.classes).map(|c| m.labels.name(c)).collect();
        let names = b.matrix("bow/label_names", &[1, cfg.classes as u64], &names)?;
        let shape = b.vector("bow/instances_shape", &[1i64])?;
        let n = b.op("Reshape", "bow/instances_vector", &[&instances, &shape])?;
        let one = b.vector("bow/one_column", &[1i64])?;
        let multiples = b.concat("bow/label_tiles", &[n, one], 0)?;
        let labels = b.op("Tile", "bow/labels", &[&names, &multiples])?;
        b.output("labels", &labels, DataType::String, &[-1, classes])?;
    }

    let table = |t: &Table| {
        let mut values = vec![0f32; t.rows() * t.dim()];
        for (r, row) in values.chunks_exact_mut(t.dim()).enumerate() {
            t.read_weights(r, row);
        }
        values
    };
    Ok(vec![
        checkpoint::matrix("embedding", &[emb_rows, dim], table(m.embedding))?,
        checkpoint::matrix("output", &[out_rows, dim + 1], table(m.output))?,
    ])
}

/// Every label's path in the Huffman tree as `[classes, depth]` matrices, padded to the deepest
/// path: the nodes (`points`), whether each step goes to the second child (`second`), and 1 on the
/// path, 0 in the padding (`mask`). The serving and the training graphs both read them.
pub(crate) struct HuffmanPaths {
    pub(crate) points: Vec<i64>,
    pub(crate) second: Vec<bool>,
    pub(crate) mask: Vec<f32>,
    /// `[classes, depth]`.
    pub(crate) dims: [u64; 2],
}

impl HuffmanPaths {
    pub(crate) fn new(tree: &Huffman) -> Self {
        let classes = tree.leaves();
        let depth = (0..classes)
            .map(|c| tree.points(c).len())
            .max()
            .unwrap_or(0);
        let mut points = vec![0i64; classes * depth];
        let mut second = vec![false; classes * depth];
        let mut mask = vec![0f32; classes * depth];
        for c in 0..classes {
            for (k, (&p, &s)) in tree.points(c).iter().zip(tree.codes(c)).enumerate() {
                points[c * depth + k] = i64::from(p);
                second[c * depth + k] = s;
                mask[c * depth + k] = 1.0;
            }
        }
        let dims = [classes as u64, depth as u64];
        HuffmanPaths {
            points,
            second,
            mask,
            dims,
        }
    }
}

/// `hs`: each label's probability, the product along its path of the branches' sigmoids
/// (`sigmoid(z)` to the second child, `sigmoid(-z)` to the first), as a sum of log-sigmoids over
/// the path's nodes padded to the deepest path.
pub(crate) fn hs_probabilities(b: &mut Builder, scores: &Output, tree: &Huffman) -> Result<Output> {
    let paths = HuffmanPaths::new(tree);
    let signs: Vec<f32> = paths
        .second
        .iter()
        .map(|&second| if second { 1.0 } else { -1.0 })
        .collect();
    let (points, mask, dims) = (paths.points, paths.mask, paths.dims);
    let points = b.matrix("hs/points", &dims, &points)?;
    let signs = b.matrix("hs/signs", &dims, &signs)?;
    let mask = b.matrix("hs/mask", &dims, &mask)?;
    let axis = b.scalar("hs/axis", 1i64)?;
    // [B, classes, depth]: each label's nodes' scores.
    let z = b.op("GatherV2", "hs/path_scores", &[scores, &points, &axis])?;
    let z = b.op("Mul", "hs/signed", &[&z, &signs])?;
    let neg = b.op("Neg", "hs/negated", &[&z])?;
    let soft = b.op("Softplus", "hs/softplus", &[&neg])?;
    let ln = b.op("Neg", "hs/log_sigmoid", &[&soft])?;
    let ln = b.op("Mul", "hs/on_path", &[&ln, &mask])?;
    let last = b.scalar("hs/depth_axis", 2i32)?;
    let sum = b.op("Sum", "hs/log_probability", &[&ln, &last])?;
    b.op("Exp", "bow/probabilities", &[&sum])
}
