//! Word vectors and the queries a model is judged by: nearest neighbours and analogies with the
//! semantics of gensim's `KeyedVectors.most_similar`, and accuracy on an analogy test set as its
//! `evaluate_word_analogies` measures it ([`Questions`]), so that judging a model needs no Python.
//!
//! ```
//! use hogwild::vectors::WordVectors;
//!
//! // In the plane: "b" is 45 degrees from "a", "c" at right angles to it.
//! let words = ["a", "b", "c"].map(String::from).to_vec();
//! let v = WordVectors::new(words, 2, vec![1.0, 0.0, 3.0, 3.0, 0.0, 2.0]).unwrap();
//! let a = v.index("a").unwrap();
//! let near = v.most_similar(&[a], &[], 10);
//! assert_eq!(near.len(), 2, "the query's own word is left out");
//! assert_eq!(v.word(near[0].index), "b");
//! assert!((near[0].similarity - 0.5f32.sqrt()).abs() < 1e-6);
//! assert!(near[1].similarity.abs() < 1e-6);
//! ```
//!
//! The vectors are unit-normalised once, when they are built. A query is gensim's: the mean of its
//! words' unit vectors weighted +1 (positive words) and -1 (negative ones), normalised; every word
//! is ranked by its cosine similarity with it (the dot product of the two unit vectors), the
//! query's own words left out, ties in the vectors' order. The scan is brute force, its rows split
//! over rayon's threads, each pass over them answering a batch of queries.

mod analogies;

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;

use ndarray::ArrayView2;

pub use analogies::{Accuracy, Case, Questions, SectionAccuracy, ANALOGY_TOPN};

use crate::models::dot;
use crate::models::Word2Vec;
use crate::store::map_ranges;
use crate::{Error, Result};

/// Words with a unit vector each, in a fixed order (a file's, most frequent first when it is
/// exported by hogwild, word2vec.c or gensim).
#[derive(Debug, Clone)]
pub struct WordVectors {
    words: Vec<String>,
    index: HashMap<String, usize>,
    dim: usize,
    /// Row `i` is word `i`'s vector divided by its length (a zero vector stays zero).
    unit: Vec<f32>,
}

/// A word of a ranking: its index and its cosine similarity with the query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbour {
    /// The word's index among the vectors.
    pub index: usize,
    /// Its cosine similarity with the query.
    pub similarity: f32,
}

/// A word of a query ([`WordVectors::query_terms`]): one of the vectors' words, by its index,
/// or a vector of its own, such as the one a model with subwords composes for a word outside
/// its vocabulary ([`Word2Vec::ngram_vector`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// One of the vectors' words, by its index.
    Word(usize),
    /// A vector of its own.
    Vector(Vec<f32>),
}

/// A query ([`WordVectors::query`]): the unit vector words are ranked by, and the words left out.
#[derive(Debug, Clone)]
pub struct Query {
    direction: Vec<f32>,
    exclude: Vec<usize>,
}

impl Query {
    /// Whether the query has no direction (its words' vectors are zero or cancel out): then
    /// every word's similarity is 0 and the ranking is the vectors' order.
    pub fn is_zero(&self) -> bool {
        self.direction.iter().all(|&x| x == 0.0)
    }
}

/// A word met again in a vectors file, and ignored: the first vector of a word is kept, as
/// gensim's `load_word2vec_format` keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Duplicate {
    /// The word.
    pub word: String,
    /// The line of the ignored vector.
    pub line: u64,
}

/// Queries answered per pass over the vectors: their directions (400 bytes each at 100
/// dimensions) stay in the first-level cache while each row is read once for all of them.
const QUERY_BATCH: usize = 64;

/// The fewest rows a thread scans: fewer are not worth a thread.
const MIN_ROWS: usize = 4096;

impl WordVectors {
    /// Vectors of `words`, row after row in `values` (`dim` per word). Refused: no words, a
    /// length that is not `words.len() * dim`, a word given twice, a value that is NaN or
    /// infinite (the error names the word).
    pub fn new(words: Vec<String>, dim: usize, values: Vec<f32>) -> Result<Self> {
        let invalid = |reason: String| Err(Error::Vectors { reason });
        if dim == 0 {
            return invalid("vectors of dimension 0".into());
        }
        if words.is_empty() {
            return invalid("no words".into());
        }
        if values.len() != words.len() * dim {
            return invalid(format!(
                "{} values for {} words of dimension {dim}",
                values.len(),
                words.len()
            ));
        }
        let mut index = HashMap::with_capacity(words.len());
        for (i, word) in words.iter().enumerate() {
            if index.insert(word.clone(), i).is_some() {
                return invalid(format!("the word {word:?} is given twice"));
            }
        }
        let mut unit = values;
        for (word, row) in words.iter().zip(unit.chunks_exact_mut(dim)) {
            if row.iter().any(|x| !x.is_finite()) {
                return invalid(format!(
                    "the vector of {word:?} holds a NaN or an infinite value"
                ));
            }
            normalise(row);
        }
        Ok(Self {
            words,
            index,
            dim,
            unit,
        })
    }

    /// The input vectors of a word2vec model: those [`Word2Vec::export_text`] writes, in its
    /// order (most frequent first), at full precision.
    pub fn from_word2vec(model: &Word2Vec) -> Result<Self> {
        let ids = model.exported_ids();
        let dim = model.config().dim;
        let mut values = vec![0.0f32; ids.len() * dim];
        for (&id, row) in ids.iter().zip(values.chunks_exact_mut(dim)) {
            model.word_vector(id, row);
        }
        let words = ids.iter().map(|&id| model.vocab().words[id].clone());
        Self::new(words.collect(), dim, values)
    }

    /// Reads vectors in word2vec's text format, as gensim's `load_word2vec_format` reads it: a
    /// `count dim` header, then `word v1 ... v_dim` per line (values separated by spaces or tabs;
    /// a trailing space, as word2vec.c writes, is fine). A word given again is ignored and
    /// returned in the list. Errors name the file and line: a bad header, a line whose number of
    /// values is not the header's dim, a value that is not a finite number, text that is not
    /// UTF-8 (word2vec's binary format is not read), fewer vectors than the header announces or
    /// more lines after them.
    pub fn read_text(path: &Path) -> Result<(Self, Vec<Duplicate>)> {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| Error::Io {
            path: name.clone(),
            message: format!("cannot open: {e}"),
        })?;
        Self::parse_text(BufReader::with_capacity(1 << 20, file), &name)
    }

    /// [`WordVectors::read_text`] of `reader`; `file` names it in errors.
    pub fn parse_text(reader: impl BufRead, file: &str) -> Result<(Self, Vec<Duplicate>)> {
        let bad = |line: u64, message: String| Error::BadLine {
            file: file.to_string(),
            line,
            message,
        };
        let mut lines = Lines {
            reader,
            file,
            buf: Vec::new(),
            number: 0,
        };
        let Some((_, header)) = lines.next()? else {
            return Err(Error::Io {
                path: file.to_string(),
                message: "the file is empty: expected word2vec's text format, \
                          a `count dim` header, then a `word v1 ... v_dim` line per word"
                    .into(),
            });
        };
        let sizes: Vec<&str> = header.split_ascii_whitespace().collect();
        let (count, dim) = match sizes[..] {
            [count, dim] => match (count.parse::<usize>(), dim.parse::<usize>()) {
                (Ok(count), Ok(dim)) => (count, dim),
                _ => (0, 0),
            },
            _ => (0, 0),
        };
        if count == 0 || dim == 0 {
            return Err(bad(
                1,
                format!(
                    "expected the header of word2vec's text format, `count dim` (both 1 or \
                     more), got {:?}",
                    header.trim_end()
                ),
            ));
        }
        // A header is no promise: memory is reserved for at most 2^26 values up front.
        let mut values = Vec::with_capacity(count.saturating_mul(dim).min(1 << 26));
        let mut words = Vec::with_capacity(count.min(1 << 20));
        let mut seen = HashSet::with_capacity(count.min(1 << 20));
        let mut duplicates = Vec::new();
        for n in 0..count {
            let Some((line, text)) = lines.next()? else {
                return Err(bad(
                    lines.number + 1,
                    format!("the file ends after {n} of the {count} vectors its header announces"),
                ));
            };
            let mut tokens = text.split_ascii_whitespace();
            let Some(word) = tokens.next() else {
                return Err(bad(
                    line,
                    "an empty line where a word's vector belongs".into(),
                ));
            };
            let start = values.len();
            for (i, token) in tokens.enumerate() {
                if i == dim {
                    break;
                }
                match fast_float2::parse::<f32, _>(token) {
                    Ok(v) if v.is_finite() => values.push(v),
                    _ => {
                        return Err(bad(
                            line,
                            format!(
                                "value {} of {word:?}, {token:?}, is not a finite number",
                                i + 1
                            ),
                        ))
                    }
                }
            }
            let got = text.split_ascii_whitespace().count() - 1;
            if got != dim {
                return Err(bad(
                    line,
                    format!("{word:?} has {got} values, the header says {dim}"),
                ));
            }
            if seen.contains(word) {
                values.truncate(start);
                duplicates.push(Duplicate {
                    word: word.to_string(),
                    line,
                });
                continue;
            }
            seen.insert(word.to_string());
            words.push(word.to_string());
        }
        while let Some((line, text)) = lines.next()? {
            if !text.trim().is_empty() {
                return Err(bad(
                    line,
                    format!("more lines than the {count} vectors the header announces"),
                ));
            }
        }
        Ok((Self::new(words, dim, values)?, duplicates))
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether there are no words (never: [`WordVectors::new`] refuses none).
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The vectors' dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The words, in the vectors' order.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// Word `index`.
    pub fn word(&self, index: usize) -> &str {
        &self.words[index]
    }

    /// The index of `word` (an exact match, as gensim's lookups).
    pub fn index(&self, word: &str) -> Option<usize> {
        self.index.get(word).copied()
    }

    /// The unit vectors, a row per word.
    pub fn unit_vectors(&self) -> ArrayView2<'_, f32> {
        ArrayView2::from_shape((self.len(), self.dim), &self.unit)
            .expect("the rows hold len * dim values")
    }

    fn row(&self, index: usize) -> &[f32] {
        &self.unit[index * self.dim..(index + 1) * self.dim]
    }

    /// The query of `positive` and `negative` words (indices from [`WordVectors::index`]):
    /// gensim's `most_similar(positive, negative)` ranks by it. Its direction is the mean of the
    /// words' unit vectors weighted +1 and -1, normalised; its words are left out of its answer.
    /// Nearest neighbours of `w`: `query(&[w], &[])`; "a is to b as c is to ?" (3CosAdd):
    /// `query(&[b, c], &[a])`.
    pub fn query(&self, positive: &[usize], negative: &[usize]) -> Query {
        let terms = |words: &[usize]| words.iter().map(|&i| Term::Word(i)).collect::<Vec<_>>();
        self.query_terms(&terms(positive), &terms(negative))
    }

    /// [`WordVectors::query`] of terms that may be vectors of their own (gensim's
    /// `most_similar` of a fastText model, whose words outside the vocabulary have the vector
    /// of their character n-grams): each is unit-normalised as the words are, and only the
    /// words are left out of the answer. A vector of the wrong length is a caller's error.
    pub fn query_terms(&self, positive: &[Term], negative: &[Term]) -> Query {
        let mut direction = vec![0.0f32; self.dim];
        let mut unit = Vec::new();
        let signed = positive.iter().map(|t| (t, 1.0f32));
        for (term, sign) in signed.chain(negative.iter().map(|t| (t, -1.0f32))) {
            let x = match term {
                Term::Word(i) => self.row(*i),
                Term::Vector(v) => {
                    assert_eq!(v.len(), self.dim, "a query vector of {} values", self.dim);
                    unit.clone_from(v);
                    normalise(&mut unit);
                    &unit[..]
                }
            };
            for (d, x) in direction.iter_mut().zip(x) {
                *d += sign * x;
            }
        }
        let weight = (positive.len() + negative.len()) as f32;
        if weight > 0.0 {
            direction.iter_mut().for_each(|d| *d /= weight);
        }
        normalise(&mut direction);
        let words = positive.iter().chain(negative);
        let mut exclude: Vec<usize> = words
            .filter_map(|t| match t {
                Term::Word(i) => Some(*i),
                Term::Vector(_) => None,
            })
            .collect();
        exclude.sort_unstable();
        exclude.dedup();
        Query { direction, exclude }
    }

    /// The `k` words most similar to each query among the first `among` words (gensim's
    /// `restrict_vocab`; the query's own words may lie past them), best first, ties in the
    /// vectors' order. Fewer than `k` when fewer words are left.
    pub fn nearest(&self, queries: &[Query], k: usize, among: usize) -> Vec<Vec<Neighbour>> {
        let rows = among.min(self.len());
        let mut answers = Vec::with_capacity(queries.len());
        if k == 0 {
            answers.resize(queries.len(), Vec::new());
            return answers;
        }
        for batch in queries.chunks(QUERY_BATCH) {
            let parts = map_ranges(rows, MIN_ROWS, |range| self.scan(batch, k, range));
            for q in 0..batch.len() {
                let mut best: Vec<Neighbour> = parts
                    .iter()
                    .flat_map(|part| part[q].iter().map(|r| r.0))
                    .collect();
                best.sort_unstable_by(ranked);
                best.truncate(k);
                answers.push(best);
            }
        }
        answers
    }

    /// The `k` words most similar to the mean of `positive` minus `negative` ([`query`]), among
    /// all the words: gensim's `most_similar(positive, negative, topn=k)`.
    ///
    /// [`query`]: WordVectors::query
    pub fn most_similar(&self, positive: &[usize], negative: &[usize], k: usize) -> Vec<Neighbour> {
        let query = self.query(positive, negative);
        self.nearest(&[query], k, self.len()).remove(0)
    }

    /// The `k` best of rows `range` for each query of `batch`, unordered.
    fn scan(
        &self,
        batch: &[Query],
        k: usize,
        range: std::ops::Range<usize>,
    ) -> Vec<BinaryHeap<Ranked>> {
        let mut heaps: Vec<BinaryHeap<Ranked>> = (0..batch.len())
            .map(|_| BinaryHeap::with_capacity(k + 1))
            .collect();
        for r in range {
            let row = self.row(r);
            for (query, heap) in batch.iter().zip(&mut heaps) {
                let candidate = Neighbour {
                    index: r,
                    similarity: dot(row, &query.direction),
                };
                // The heap's top is the worst of the best `k` so far.
                let full = heap.len() == k;
                if full
                    && heap
                        .peek()
                        .is_some_and(|worst| ranked(&candidate, &worst.0).is_ge())
                {
                    continue;
                }
                if query.exclude.contains(&r) {
                    continue;
                }
                if full {
                    heap.pop();
                }
                heap.push(Ranked(candidate));
            }
        }
        heaps
    }
}

/// The order of an answer: higher similarity first, then lower index.
fn ranked(a: &Neighbour, b: &Neighbour) -> Ordering {
    b.similarity
        .total_cmp(&a.similarity)
        .then(a.index.cmp(&b.index))
}

/// A neighbour ordered worst last by [`ranked`], so that a max-heap's top is the worst.
struct Ranked(Neighbour);

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        ranked(&self.0, &other.0)
    }
}

/// Divides `v` by its length, computed in f64 so that no square overflows; a zero vector stays
/// zero (as gensim's `unitvec` leaves it).
fn normalise(v: &mut [f32]) {
    let norm = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        v.iter_mut()
            .for_each(|x| *x = (f64::from(*x) / norm) as f32);
    }
}

/// The lines of a text file as UTF-8, numbered from 1.
struct Lines<'a, R> {
    reader: R,
    file: &'a str,
    buf: Vec<u8>,
    /// The number of the line last returned.
    number: u64,
}

impl<R: BufRead> Lines<'_, R> {
    /// The next line's number and text (with its line ending), or `None` at the end of the file.
    fn next(&mut self) -> Result<Option<(u64, &str)>> {
        self.buf.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| Error::Io {
                path: self.file.to_string(),
                message: format!("cannot read line {}: {e}", self.number + 1),
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.number += 1;
        match std::str::from_utf8(&self.buf) {
            Ok(text) => Ok(Some((self.number, text))),
            Err(e) => Err(Error::BadLine {
                file: self.file.to_string(),
                line: self.number,
                message: format!(
                    "not UTF-8 text (byte {}): only text is read (word2vec's binary format is \
                     not)",
                    e.valid_up_to() + 1
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
