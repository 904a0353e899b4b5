//! word2vec (Mikolov et al. 2013; word2vec.c, gensim): skip-gram (`sg=1`) or CBOW (`sg=0`,
//! `cbow_mean=1`), chosen by [`Arch`], with negative sampling, hierarchical softmax (`hs`) or
//! both.
//!
//! An instance is one sentence: the word ids of a line (a uint64 slot, `words` by default). Every
//! kept word of a sentence has a window shrunk at random to `1..=window` words on each side.
//! Skip-gram trains the input vector of every context word in it to predict the word; CBOW trains
//! the mean of the context words' input vectors to predict it and adds the correction to each of
//! them. Either predicts the word against `negative` noise words drawn from the unigram
//! distribution raised to the power 0.75 (drawn per context word in skip-gram, per word in CBOW,
//! as word2vec.c and gensim draw them), and with `hs` through the binary decisions on the word's
//! way down a Huffman tree of the vocabulary's counts (one output row per inner node, word2vec.c's
//! `syn1`; labels 1 for a node's first child, 0 for its second, as word2vec.c's codes). Frequent
//! words are
//! subsampled (kept with probability `(sqrt(c / t) + 1) * t / c`, `t = sample * total words`), and
//! the learning rate decays linearly from the optimizer's `lr` to `min_lr` over each training run
//! (the run's epochs: `hogwild train --epochs`), following the words taken by all workers together.
//! Updates are plain SGD applied at once, Hogwild-style, exactly as word2vec.c does.
//!
//! With subwords (`minn`, `maxn`, `subword_buckets`: fastText's `-minn -maxn -bucket`) the input
//! table has `subword_buckets` more rows, one per hashed character n-gram ([`Subwords`]), and a
//! word's input vector is the mean of its own row and its n-grams' rows, each of which receives
//! the whole correction of that mean (fastText's `skipgram`/`cbow` and `Model::update`); CBOW
//! takes the mean over all the rows of its context words. A skip-gram pair is then fastText's:
//! the word's rows predict each context word. Exported vectors are those means, and a word outside
//! the vocabulary gets the mean of its n-grams' rows ([`Word2Vec::ngram_vector`]).
//!
//! The vocabulary (one `word count` line per id, most frequent first when built from text) is
//! built by a first pass over the training files: [`Vocab::count_text`] for plain text, whose
//! lines are then turned into MultiSlot id files by [`text_to_ids`], or [`Vocab::count_ids`] for
//! MultiSlot id files. Ids whose count is below `min_count` are skipped. Trained vectors are
//! written in word2vec's text format by [`Word2Vec::export_text`], which gensim's
//! `KeyedVectors.load_word2vec_format` reads.
//!
//! A checkpoint holds the model's vocabulary (the section `vocab`, [`Model::sections`]), so a
//! saved model names its vectors' words wherever it is loaded, whatever later runs write into the
//! vocabulary file. Checkpoints written before they held it are read with the vocabulary file
//! their configuration names ([`VocabSource::File`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{padded, Huffman, ModelConfig, ModelKind, OptimizerDesc};
use crate::checkpoint::{Checkpoint, Section};
use crate::feed::{start_feed, Batch, DataFeedDesc, FeedOptions, SlotType};
use crate::files::{replace_file, Output};
use crate::model::{Model, RunPlan, StageTimes};
use crate::optim::{LinearDecay, Sgd};
use crate::rng::{unit_f32, AliasTable, XorShift64Star};
use crate::store::{in_row_ranges, Table};
use crate::subwords::Subwords;
use crate::{Error, Result};

mod word_rows;
use word_rows::WordRows;

/// What the training files hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    /// MultiSlot files whose words slot holds word ids (lines of the vocabulary file).
    #[default]
    Ids,
    /// Plain text, one sentence per line, words separated by white space; the command line
    /// builds the vocabulary and converts the text to MultiSlot id files before training.
    Text,
}

/// Which word2vec architecture trains the vectors (word2vec.c's `-cbow`, gensim's `sg`). Both
/// use negative sampling; the names are fastText's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Skip-gram (gensim's `sg=1`): each context word's input vector predicts the word. The
    /// default, and what a model saved before the setting existed holds.
    #[default]
    Skipgram,
    /// Continuous bag of words (gensim's `sg=0` with its default `cbow_mean=1`): the mean of the
    /// context words' input vectors predicts the word, and every context word's input vector
    /// receives the whole correction to that mean.
    Cbow,
}

/// Read by hand so that a wrong value names its key: inside the model's tagged table serde's
/// own error points at the table's first line and not at the key.
impl<'de> Deserialize<'de> for Arch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let value = toml::Value::deserialize(d)?;
        match value.as_str() {
            Some("skipgram") => Ok(Self::Skipgram),
            Some("cbow") => Ok(Self::Cbow),
            _ => Err(serde::de::Error::custom(format!(
                "arch = {value}: expected \"skipgram\" (gensim's sg=1) or \"cbow\" (sg=0)"
            ))),
        }
    }
}

/// The word2vec model's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Word2VecConfig {
    /// The uint64 slot holding a sentence's word ids.
    #[serde(default = "default_words")]
    pub words_slot: String,
    /// The vocabulary file: one `word count` line per id, line 1 holding id 0. A new model's
    /// vocabulary is read from it (or counted into it); a saved model holds its own.
    pub vocab_file: PathBuf,
    /// What the training files hold.
    #[serde(default)]
    pub input: Input,
    /// Skip-gram or CBOW.
    #[serde(default)]
    pub arch: Arch,
    /// Vector width.
    #[serde(default = "default_dim")]
    pub dim: usize,
    /// Largest distance between a word and a context word.
    #[serde(default = "default_window")]
    pub window: usize,
    /// Noise words per example: (word, context) pair in skip-gram, word in CBOW; 0 with `hs`
    /// trains hierarchical softmax alone.
    #[serde(default = "default_negative")]
    pub negative: usize,
    /// Hierarchical softmax (gensim's `hs=1`, word2vec.c's `-hs 1`): the word is predicted
    /// through the binary decisions on its way down a Huffman tree of the vocabulary's counts,
    /// about `log2(words)` output rows per example, fewer for frequent words; beside negative
    /// sampling unless `negative = 0`.
    #[serde(default)]
    pub hs: bool,
    /// Words seen fewer times are skipped (and left out of the vocabulary built from text).
    #[serde(default = "default_min_count")]
    pub min_count: u64,
    /// Subsampling threshold of frequent words (0 disables subsampling).
    #[serde(default = "default_sample")]
    pub sample: f64,
    /// The learning rate reached at the end of a training run (it starts at the optimizer's lr).
    #[serde(default = "default_min_lr")]
    pub min_lr: f32,
    /// No longer a setting, and refused when given: the run's epochs (`hogwild train --epochs`)
    /// are both the passes and what the learning rate decays over, so the two cannot disagree.
    #[serde(default, skip_serializing)]
    pub epochs: Option<usize>,
    /// Longest sentence: longer text lines are split when converted to ids.
    #[serde(default = "default_max_sentence")]
    pub max_sentence: usize,
    /// Seed of the initial vectors and of the workers' random streams.
    #[serde(default)]
    pub seed: u64,
    /// Shortest character n-gram of a word's subwords (fastText's `-minn`), counted in
    /// characters of the word wrapped in `<` and `>`; with `maxn` and `subword_buckets`. 0 with
    /// the other two 0 (the default, and what a model saved before the setting existed holds):
    /// no subwords.
    #[serde(default)]
    pub minn: usize,
    /// Longest character n-gram (fastText's `-maxn`).
    #[serde(default)]
    pub maxn: usize,
    /// Input rows the character n-grams are hashed into (fastText's `-bucket`), after the
    /// vocabulary's rows. With subwords a word's input vector is the mean of its own row and its
    /// n-grams' rows, and a word outside the vocabulary has the mean of its n-grams' rows
    /// (`hogwild word-vectors`).
    #[serde(default)]
    pub subword_buckets: usize,
}

/// The defaults of a configuration file's `[model]` keys, except `vocab_file`, which has none
/// (empty here: set it, or build the model with a [`Vocab`] of your own, [`Word2Vec::new`]).
impl Default for Word2VecConfig {
    fn default() -> Self {
        Self::new(PathBuf::new())
    }
}

fn default_words() -> String {
    "words".into()
}
fn default_dim() -> usize {
    100
}
fn default_window() -> usize {
    5
}
fn default_negative() -> usize {
    5
}
fn default_min_count() -> u64 {
    5
}
fn default_sample() -> f64 {
    1e-3
}
fn default_min_lr() -> f32 {
    1e-4
}
fn default_max_sentence() -> usize {
    10_000
}

impl Word2VecConfig {
    /// Settings with every default and the given vocabulary file.
    pub fn new(vocab_file: impl Into<PathBuf>) -> Self {
        Self {
            words_slot: default_words(),
            vocab_file: vocab_file.into(),
            input: Input::default(),
            arch: Arch::default(),
            dim: default_dim(),
            window: default_window(),
            negative: default_negative(),
            hs: false,
            min_count: default_min_count(),
            sample: default_sample(),
            min_lr: default_min_lr(),
            epochs: None,
            max_sentence: default_max_sentence(),
            seed: 0,
            minn: 0,
            maxn: 0,
            subword_buckets: 0,
        }
    }

    /// The character n-grams of the vocabulary's words (`minn`, `maxn`, `subword_buckets`), or
    /// `None` when all three are 0; refused, naming the key, when they do not make sense together.
    pub fn subwords(&self) -> Result<Option<Subwords>> {
        let (minn, maxn, buckets) = (self.minn, self.maxn, self.subword_buckets);
        if minn == 0 && maxn == 0 {
            if buckets == 0 {
                return Ok(None);
            }
            return Err(Error::InvalidConfig {
                field: "subword_buckets".into(),
                reason: format!(
                    "{buckets} n-gram rows need minn and maxn, the n-grams' lengths (fastText's \
                     -minn 3 -maxn 6: minn = 3, maxn = 6)"
                ),
            });
        }
        if buckets > MAX_SUBWORD_BUCKETS {
            return Err(Error::InvalidConfig {
                field: "subword_buckets".into(),
                reason: format!("{buckets} is more than the {MAX_SUBWORD_BUCKETS} allowed"),
            });
        }
        Subwords::new(minn, maxn, buckets as u64).map(Some)
    }

    /// Why `epochs` is refused, when it is given.
    pub(crate) fn obsolete_epochs(&self) -> Option<String> {
        self.epochs.map(|epochs| {
            format!(
                "remove `epochs = {epochs}`: the run's epochs (hogwild train --epochs) set both \
                 the passes and the learning-rate decay"
            )
        })
    }

    /// Checks the settings with the optimizer's learning rate (see
    /// [`ModelConfig::validate`](super::ModelConfig::validate)).
    pub(crate) fn check(&self, lr: f32) -> Result<()> {
        let bad = |field: &str, reason: String| {
            Err(Error::InvalidConfig {
                field: field.into(),
                reason,
            })
        };
        if self.dim == 0 {
            return bad("dim", "must be at least 1".into());
        }
        if self.window == 0 {
            return bad("window", "must be at least 1".into());
        }
        if self.negative == 0 && !self.hs {
            return bad(
                "negative",
                "must be at least 1, or set hs = true (hierarchical softmax alone)".into(),
            );
        }
        if let Some(reason) = self.obsolete_epochs() {
            return bad("epochs", reason);
        }
        if self.max_sentence == 0 {
            return bad("max_sentence", "must be at least 1".into());
        }
        self.subwords()?;
        if !(self.sample >= 0.0 && self.sample.is_finite()) {
            return bad("sample", format!("{} must be finite and >= 0", self.sample));
        }
        if !(lr.is_finite() && lr > 0.0) {
            return bad("optimizer.lr", format!("{lr} must be positive"));
        }
        if !(self.min_lr.is_finite() && self.min_lr >= 0.0 && self.min_lr <= lr) {
            return bad(
                "min_lr",
                format!(
                    "{} must be between 0 and the optimizer's lr {lr}",
                    self.min_lr
                ),
            );
        }
        Ok(())
    }

    /// Whether the model can read batches laid out by `desc`: its one slot, the words (see
    /// [`ModelConfig::check_desc`](super::ModelConfig::check_desc)).
    pub(crate) fn check_desc(&self, desc: &DataFeedDesc) -> Result<()> {
        words_position(desc, &self.words_slot).map(drop)
    }
}

/// A vocabulary: the word and its count for every id.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Vocab {
    /// The word of every id.
    pub words: Vec<String>,
    /// How often each word was counted, by id.
    pub counts: Vec<u64>,
}

impl Vocab {
    /// Number of ids.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether there are no ids.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Reads a vocabulary file: one `word count` line per id.
    pub fn from_file(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: format!("cannot open the vocabulary: {e}"),
        })?;
        let mut vocab = Vocab::default();
        for (n, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| Error::Io {
                path: path.display().to_string(),
                message: format!("line {}: {e}", n + 1),
            })?;
            let mut parts = line.split_whitespace();
            let (Some(word), Some(count), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(Error::Io {
                    path: format!("{}:{}", path.display(), n + 1),
                    message: format!("expected `word count`, got {line:?}"),
                });
            };
            let count = count.parse::<u64>().map_err(|_| Error::Io {
                path: format!("{}:{}", path.display(), n + 1),
                message: format!("count {count:?} of word {word:?} is not a whole number"),
            })?;
            vocab.words.push(word.to_string());
            vocab.counts.push(count);
        }
        if vocab.is_empty() {
            return Err(Error::Io {
                path: path.display().to_string(),
                message: "the vocabulary is empty".into(),
            });
        }
        Ok(vocab)
    }

    /// Writes the vocabulary file (atomically: a temporary file renamed into place).
    pub fn write(&self, path: &Path) -> Result<()> {
        let io = |e: std::io::Error| Error::Io {
            path: path.display().to_string(),
            message: format!("cannot write the vocabulary: {e}"),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        replace_file(
            path,
            |tmp| {
                let mut out = BufWriter::new(std::fs::File::create(tmp)?);
                for (w, c) in self.words.iter().zip(&self.counts) {
                    writeln!(out, "{w} {c}")?;
                }
                out.into_inner().map_err(|e| e.into_error())?.sync_all()
            },
            |e| e,
        )
        .map_err(io)
    }

    /// The vocabulary as a checkpoint section: `ids u64 | per id: count u64 | len u32 | word`
    /// (little-endian; the word's UTF-8 bytes, so that any word survives, white space included).
    fn to_bytes(&self) -> Vec<u8> {
        let text: usize = self.words.iter().map(String::len).sum();
        let mut b = Vec::with_capacity(8 + 12 * self.len() + text);
        b.extend_from_slice(&(self.len() as u64).to_le_bytes());
        for (w, c) in self.words.iter().zip(&self.counts) {
            b.extend_from_slice(&c.to_le_bytes());
            b.extend_from_slice(&(w.len() as u32).to_le_bytes());
            b.extend_from_slice(w.as_bytes());
        }
        b
    }

    /// Reads [`Vocab::to_bytes`]; the error says what is wrong.
    fn from_bytes(mut b: &[u8]) -> std::result::Result<Self, String> {
        fn take<const N: usize>(b: &mut &[u8]) -> Option<[u8; N]> {
            let (head, rest) = b.split_first_chunk::<N>()?;
            *b = rest;
            Some(*head)
        }
        let ids = take::<8>(&mut b).map(u64::from_le_bytes);
        let ids = ids.ok_or("it ends inside the number of words")?;
        // Every word takes 12 bytes at least: a larger number is refused before allocating.
        if ids > b.len() as u64 / 12 {
            return Err(format!("{ids} words declared in {} bytes", b.len()));
        }
        let mut vocab = Vocab {
            words: Vec::with_capacity(ids as usize),
            counts: Vec::with_capacity(ids as usize),
        };
        for id in 0..ids {
            let count = take::<8>(&mut b).map(u64::from_le_bytes);
            let len = take::<4>(&mut b).map(u32::from_le_bytes);
            let (Some(count), Some((word, rest))) =
                (count, len.and_then(|n| b.split_at_checked(n as usize)))
            else {
                return Err(format!("it ends inside word {id}"));
            };
            let word = std::str::from_utf8(word).map_err(|_| format!("word {id} is not UTF-8"))?;
            vocab.words.push(word.to_string());
            vocab.counts.push(count);
            b = rest;
        }
        if !b.is_empty() {
            return Err(format!("{} bytes after its last word", b.len()));
        }
        if vocab.is_empty() {
            return Err("it has no words".into());
        }
        Ok(vocab)
    }

    /// Counts the white-space separated words of text files and keeps those seen at least
    /// `min_count` times, most frequent first (ties in byte order of the word).
    pub fn count_text(files: &[PathBuf], min_count: u64) -> Result<Self> {
        let mut counts: HashMap<String, u64> = HashMap::new();
        for path in files {
            for_each_line(path, |line| {
                for word in line.split_ascii_whitespace() {
                    match counts.get_mut(word) {
                        Some(c) => *c += 1,
                        None => {
                            counts.insert(word.to_string(), 1);
                        }
                    }
                }
                Ok(())
            })?;
        }
        let mut kept: Vec<(String, u64)> = counts
            .into_iter()
            .filter(|&(_, c)| c >= min_count.max(1))
            .collect();
        kept.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        if kept.is_empty() {
            return Err(Error::InvalidConfig {
                field: "min_count".into(),
                reason: format!(
                    "no word of {} occurs at least {min_count} times",
                    file_names(files)
                ),
            });
        }
        let (words, counts) = kept.into_iter().unzip();
        Ok(Vocab { words, counts })
    }

    /// Counts the ids of slot `slot` in MultiSlot files: ids `0..=max id`, each named by its
    /// number.
    pub fn count_ids(desc: &DataFeedDesc, files: &[PathBuf], slot: &str) -> Result<Self> {
        let at = words_position(desc, slot)?;
        let (mut queues, feed) = start_feed(desc, files, &FeedOptions::default())?;
        let mut counts: Vec<u64> = Vec::new();
        while let Some(batch) = queues[0].recv() {
            if let crate::feed::SlotValues::U64(ids) = &batch.slots[at].values {
                for &id in ids {
                    let id = usize::try_from(id)
                        .ok()
                        .filter(|&i| i < u32::MAX as usize)
                        .ok_or_else(|| Error::InvalidConfig {
                            field: format!("words slot \"{slot}\""),
                            reason: format!("word id {id} is too large for a vocabulary"),
                        })?;
                    if id >= counts.len() {
                        counts.resize(id + 1, 0);
                    }
                    counts[id] += 1;
                }
            }
        }
        feed.join()?;
        if counts.is_empty() {
            return Err(Error::InvalidConfig {
                field: format!("words slot \"{slot}\""),
                reason: format!("no word ids in {}", file_names(files)),
            });
        }
        let words = (0..counts.len()).map(|i| i.to_string()).collect();
        Ok(Vocab { words, counts })
    }
}

fn file_names(files: &[PathBuf]) -> String {
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}

/// Calls `f` on every line of a text file (invalid UTF-8 is replaced).
fn for_each_line(path: &Path, mut f: impl FnMut(&str) -> Result<()>) -> Result<()> {
    let file = std::fs::File::open(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        message: format!("cannot open: {e}"),
    })?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: format!("cannot read: {e}"),
        })?;
        if n == 0 {
            return Ok(());
        }
        f(&String::from_utf8_lossy(&buf))?;
    }
}

/// Converts text files to MultiSlot id files in `out_dir` (`<N>-<name>.ids` for the N-th input
/// file, counted from 0): every
/// line becomes `count id1 ... idN` over its words in the vocabulary, split after `max_sentence`
/// ids; lines with no such word are left out. Returns the written files.
pub fn text_to_ids(
    vocab: &Vocab,
    files: &[PathBuf],
    out_dir: &Path,
    max_sentence: usize,
) -> Result<Vec<PathBuf>> {
    let ids: HashMap<&str, usize> = vocab
        .words
        .iter()
        .enumerate()
        .map(|(i, w)| (w.as_str(), i))
        .collect();
    let io = |path: &Path, e: std::io::Error| Error::Io {
        path: path.display().to_string(),
        message: format!("cannot write ids: {e}"),
    };
    std::fs::create_dir_all(out_dir).map_err(|e| io(out_dir, e))?;
    let mut written = Vec::with_capacity(files.len());
    let mut sentence: Vec<usize> = Vec::new();
    let mut line_out = String::new();
    for (n, path) in files.iter().enumerate() {
        let name = path
            .file_name()
            .map_or_else(|| "text".into(), |n| n.to_string_lossy().into_owned());
        let target = out_dir.join(format!("{n}-{name}.ids"));
        // Replaced whole, so that another process reading the same ids file (two runs over one
        // corpus) keeps reading a whole file.
        replace_file(
            &target,
            |tmp| convert_file(&ids, path, tmp, max_sentence, &mut sentence, &mut line_out),
            |e| io(&target, e),
        )?;
        written.push(target);
    }
    Ok(written)
}

/// Writes the ids of text file `path`'s lines to `target` (see [`text_to_ids`]).
fn convert_file(
    ids: &HashMap<&str, usize>,
    path: &Path,
    target: &Path,
    max_sentence: usize,
    sentence: &mut Vec<usize>,
    line_out: &mut String,
) -> Result<()> {
    let io = |e: std::io::Error| Error::Io {
        path: target.display().to_string(),
        message: format!("cannot write ids: {e}"),
    };
    let mut out = BufWriter::new(std::fs::File::create(target).map_err(io)?);
    for_each_line(path, |line| {
        sentence.clear();
        sentence.extend(line.split_ascii_whitespace().filter_map(|w| ids.get(w)));
        for chunk in sentence.chunks(max_sentence.max(1)) {
            use std::fmt::Write as _;
            line_out.clear();
            let _ = write!(line_out, "{}", chunk.len());
            for id in chunk {
                let _ = write!(line_out, " {id}");
            }
            line_out.push('\n');
            out.write_all(line_out.as_bytes()).map_err(io)?;
        }
        Ok(())
    })?;
    out.flush().map_err(io)
}

fn words_position(desc: &DataFeedDesc, name: &str) -> Result<usize> {
    let used = desc.used_slots();
    let at = used
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(|| Error::InvalidConfig {
            field: "words_slot".into(),
            reason: format!("the DataFeedDesc has no used slot \"{name}\""),
        })?;
    if used[at].slot_type() != SlotType::U64 {
        return Err(Error::InvalidConfig {
            field: format!("words slot \"{name}\""),
            reason: "must be a uint64 slot in the DataFeedDesc".into(),
        });
    }
    Ok(at)
}

/// `ln(1 + exp(-x))` on `[-MAX_EXP, MAX_EXP]`, tabulated and interpolated linearly (error below
/// 3e-7): the loss of every (word, target) pair costs two loads instead of a logarithm.
#[derive(Debug, Clone)]
struct SoftplusTable(Vec<f32>);

const SOFTPLUS_STEPS: usize = 4096;

impl SoftplusTable {
    fn new() -> Self {
        let step = 2.0 * f64::from(MAX_EXP) / SOFTPLUS_STEPS as f64;
        Self(
            (0..=SOFTPLUS_STEPS + 1)
                .map(|i| {
                    let x = -f64::from(MAX_EXP) + i as f64 * step;
                    (-x).exp().ln_1p() as f32
                })
                .collect(),
        )
    }

    /// The value at `x` in `[-MAX_EXP, MAX_EXP]`.
    #[inline(always)]
    fn at(&self, x: f32) -> f32 {
        let pos = (x + MAX_EXP) * (SOFTPLUS_STEPS as f32 / (2.0 * MAX_EXP));
        let i = (pos as usize).min(SOFTPLUS_STEPS);
        let frac = pos - i as f32;
        let (a, b) = (self.0[i], self.0[i + 1]);
        a + (b - a) * frac
    }
}

/// How many examples ((word, context) pairs in skip-gram, words in CBOW) ahead of the one
/// training [`Word2Vec::train_sentence`] prefetches rows: a pair takes about a microsecond, a
/// memory access a tenth of that, so two pairs ahead the rows have arrived without crowding the
/// cache (1, 2, 3 and 4 pairs ahead trained a 2-thread skip-gram epoch equally fast, in both of
/// the VM's states described at [`Table::prefetch_weights_to_write`]).
const PREFETCH_AHEAD: usize = 2;

/// Sigmoid arguments beyond this are saturated: such pairs are not updated (gensim's MAX_EXP).
const MAX_EXP: f32 = 6.0;

/// The name of the checkpoint section holding the vocabulary.
const VOCAB_SECTION: &str = "vocab";

/// Where a model's vocabulary came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VocabSource {
    /// Given to [`Word2Vec::new`]: read from, or counted into, the configuration's `vocab_file`.
    Given,
    /// Stored in the checkpoint the model was loaded from.
    Checkpoint(PathBuf),
    /// Read from the vocabulary file named by a checkpoint written before checkpoints held
    /// vocabularies: right only if the file has not been rewritten since the model was trained.
    /// Saving the model again stores it in the checkpoint.
    File {
        /// The checkpoint loaded.
        checkpoint: PathBuf,
        /// The vocabulary file it names.
        file: PathBuf,
    },
}

/// The word2vec model: input vectors (the ones exported) and output vectors, one row per id,
/// plus the training progress that drives the learning-rate decay.
#[derive(Debug)]
pub struct Word2Vec {
    cfg: Word2VecConfig,
    opt: Sgd<f32>,
    vocab: Vocab,
    vocab_source: VocabSource,
    /// Per id: the probability (scaled to 2^32) of keeping an occurrence; 0 for skipped ids.
    keep: Vec<u64>,
    noise: AliasTable,
    softplus: SoftplusTable,
    input: Table,
    output: Table,
    /// Hierarchical softmax's tree and its inner nodes' output rows, with `hs`.
    hs: Option<HsLayer>,
    /// Each word's input rows (its own and its character n-grams'), with subwords.
    word_rows: Option<WordRows>,
    /// The run's progress mirrored for checkpoints (words done, as two 32-bit halves), written
    /// when the tables are handed out to be saved: every worker writing it after every batch
    /// would move its cache line between the cores for nothing.
    progress_table: Table,
    /// The training run's progress: words (kept by `min_count`, before subsampling) taken so far,
    /// of the corpus's words times the run's epochs.
    decay: LinearDecay,
    /// Words of the corpus kept by `min_count` (one epoch's).
    corpus_words: u64,
    /// Words trained on (after subsampling) since the last `run_metrics` call.
    effective: AtomicU64,
    /// Workers created so far (each gets its own random stream).
    workers: AtomicU64,
}

/// Hierarchical softmax's output layer: the Huffman tree of the vocabulary's counts and one
/// output row per inner node (word2vec.c's `syn1`).
#[derive(Debug)]
struct HsLayer {
    tree: Huffman,
    table: Table,
}

/// The name of hierarchical softmax's table in checkpoints.
const HS_TABLE: &str = "output_hs";

/// The rows of hierarchical softmax's table for `words` words, refused below 2 words (a tree
/// needs two leaves).
fn hs_rows(words: usize) -> Result<usize> {
    match words {
        0 | 1 => Err(Error::InvalidConfig {
            field: "hs".into(),
            reason: format!(
                "hierarchical softmax needs a vocabulary of at least 2 words, not {words}"
            ),
        }),
        n => Ok(n - 1),
    }
}

/// The most n-gram rows: with the vocabulary's, every input row is numbered by a `u32` (at dim
/// 100 they would take 800 GB).
const MAX_SUBWORD_BUCKETS: usize = 1 << 31;

/// The input table's rows for a vocabulary of `words` words: one per word, then
/// `subword_buckets` n-gram rows; refused past what word2vec's `u32` row numbers reach.
fn input_rows(cfg: &Word2VecConfig, words: usize) -> Result<usize> {
    match words.checked_add(cfg.subword_buckets) {
        Some(rows) if rows <= u32::MAX as usize => Ok(rows),
        _ => Err(Error::InvalidConfig {
            field: "subword_buckets".into(),
            reason: format!(
                "{} n-gram rows after the {words} words' rows exceed the {} rows a model can have",
                cfg.subword_buckets,
                u32::MAX
            ),
        }),
    }
}

/// One worker's scratch buffers and random stream.
#[derive(Debug)]
pub struct Word2VecWorker {
    rng: XorShift64Star,
    sentence: Vec<u32>,
    /// The sentence's (target, input, end of its noise words in `pair_negs`) triples, drawn
    /// before any is trained so that the rows of the pairs ahead can be prefetched: (word,
    /// context word) pairs, or with subwords (context word, word) pairs.
    pairs: Vec<(u32, u32, usize)>,
    /// CBOW's (word, end of its context words in `contexts`, end of its noise words in
    /// `pair_negs`) triples, drawn before any is trained, as `pairs` are.
    windows: Vec<(u32, usize, usize)>,
    contexts: Vec<u32>,
    /// The noise words of every pair (skip-gram) or word (CBOW).
    pair_negs: Vec<u32>,
    l1: Vec<f32>,
    neu1e: Vec<f32>,
    row: Vec<f32>,
    words_at: usize,
}

impl Word2Vec {
    /// A model over `vocab` (its parameters not yet initialised: call [`Word2Vec::init`]).
    pub fn new(cfg: Word2VecConfig, opt: Sgd<f32>, vocab: Vocab) -> Result<Self> {
        cfg.check(opt.lr)?;
        let rows = vocab.len();
        let input = Table::new("input", input_rows(&cfg, rows)?, cfg.dim, &opt)?;
        let output = Table::new("output", rows, cfg.dim, &opt)?;
        let hs = match cfg.hs {
            true => Some(Table::new(HS_TABLE, hs_rows(rows)?, cfg.dim, &opt)?),
            false => None,
        };
        let progress_table = Table::new("progress", 1, 2, &opt)?;
        let source = VocabSource::Given;
        Self::assemble(cfg, opt, vocab, source, [input, output], hs, progress_table)
    }

    /// A model from a checkpoint: its tables and the vocabulary stored with them. A checkpoint
    /// written before checkpoints held vocabularies has none: the vocabulary file named in
    /// `cfg` is read instead ([`VocabSource::File`]), and refused when it cannot be read or does
    /// not have a word for every row of the checkpoint's vectors.
    pub fn from_checkpoint(
        cfg: Word2VecConfig,
        opt: Sgd<f32>,
        ck: &mut Checkpoint,
    ) -> Result<Self> {
        cfg.check(opt.lr)?;
        let ck_path = ck.path.clone();
        let ck_err = |reason: String| Error::Checkpoint {
            path: ck_path.display().to_string(),
            reason,
        };
        let (vocab, source) = match ck.take_section(VOCAB_SECTION) {
            Some(bytes) => (
                Vocab::from_bytes(&bytes)
                    .map_err(|e| ck_err(format!("corrupt: its vocabulary: {e}")))?,
                VocabSource::Checkpoint(ck_path.clone()),
            ),
            None => {
                let file = &cfg.vocab_file;
                let older = format!(
                    "written by an older hogwild, it holds no vocabulary and names the \
                     vocabulary file {}{}",
                    file.display(),
                    if file.is_relative() {
                        " (relative to the current directory)"
                    } else {
                        ""
                    }
                );
                let vocab = Vocab::from_file(file)
                    .map_err(|e| ck_err(format!("{older}, which cannot be read: {e}")))?;
                let rows = ck.tables.iter().find(|t| t.name() == "input");
                let expected = vocab.len() + cfg.subword_buckets;
                if let Some(rows) = rows.map(Table::rows).filter(|&r| r != expected) {
                    return Err(ck_err(format!(
                        "{older}, which has {} words for the model's {rows} vectors: it is not \
                         the vocabulary the model was trained with",
                        vocab.len()
                    )));
                }
                let source = VocabSource::File {
                    checkpoint: ck_path.clone(),
                    file: file.clone(),
                };
                (vocab, source)
            }
        };
        let input = ck.take_table("input", input_rows(&cfg, vocab.len())?, cfg.dim)?;
        let output = ck.take_table("output", vocab.len(), cfg.dim)?;
        let hs = match cfg.hs {
            true => Some(ck.take_table(HS_TABLE, hs_rows(vocab.len())?, cfg.dim)?),
            false => None,
        };
        let progress_table = ck.take_table("progress", 1, 2)?;
        let tables = [input, output];
        let m = Self::assemble(cfg, opt, vocab, source, tables, hs, progress_table)?;
        let cells = m.progress_table.weights(0);
        let done =
            u64::from(cells[0].load().to_bits()) | (u64::from(cells[1].load().to_bits()) << 32);
        m.decay.set_done(done);
        Ok(m)
    }

    fn assemble(
        cfg: Word2VecConfig,
        opt: Sgd<f32>,
        vocab: Vocab,
        vocab_source: VocabSource,
        [input, output]: [Table; 2],
        hs: Option<Table>,
        progress_table: Table,
    ) -> Result<Self> {
        let min_count = cfg.min_count.max(1);
        let total: u64 = vocab.counts.iter().filter(|&&c| c >= min_count).sum();
        if total == 0 {
            return Err(Error::InvalidConfig {
                field: "min_count".into(),
                reason: format!(
                    "no word of the vocabulary {} occurs at least {min_count} times",
                    vocab_origin(&cfg, &vocab_source)
                ),
            });
        }
        let threshold = cfg.sample * total as f64;
        let keep = vocab
            .counts
            .iter()
            .map(|&c| {
                if c < min_count {
                    0
                } else if threshold <= 0.0 {
                    1 << 32
                } else {
                    let c = c as f64;
                    let p = ((c / threshold).sqrt() + 1.0) * threshold / c;
                    (p.min(1.0) * 4_294_967_296.0) as u64
                }
            })
            .collect();
        let weights: Vec<f64> = vocab
            .counts
            .iter()
            .map(|&c| {
                if c < min_count {
                    0.0
                } else {
                    (c as f64).powf(0.75)
                }
            })
            .collect();
        let hs = hs.map(|table| HsLayer {
            tree: Huffman::new(&vocab.counts),
            table,
        });
        let word_rows = cfg.subwords()?.map(|sw| WordRows::new(sw, &vocab.words));
        Ok(Self {
            hs,
            word_rows,
            noise: AliasTable::new(&weights),
            softplus: SoftplusTable::new(),
            keep,
            corpus_words: total,
            cfg,
            opt,
            vocab,
            vocab_source,
            input,
            output,
            progress_table,
            decay: LinearDecay::default(),
            effective: AtomicU64::new(0),
            workers: AtomicU64::new(0),
        })
    }

    /// The settings.
    pub fn config(&self) -> &Word2VecConfig {
        &self.cfg
    }
    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }
    /// Where the vocabulary came from.
    pub fn vocab_source(&self) -> &VocabSource {
        &self.vocab_source
    }
    /// The input vectors (the word vectors).
    pub fn input(&self) -> &Table {
        &self.input
    }
    /// The output vectors (negative sampling's; unused with `negative = 0`).
    pub fn output(&self) -> &Table {
        &self.output
    }

    /// The startup step: input rows (words' and n-grams', as fastText fills both) uniform in
    /// `[-1/dim, 1/dim]` (fastText's and gensim's; word2vec.c's start is half as wide, which
    /// leaves CBOW's mean of context rows smaller and slower to train: a point of analogy
    /// accuracy lower after 10 epochs on GCIDE, docs/benchmarks.md), deterministic in the seed
    /// and the row; output vectors zero; progress zero.
    pub fn init(&self) {
        let dim = self.cfg.dim;
        in_row_ranges(self.input.rows(), |range| {
            let mut row = vec![0.0f32; dim];
            for r in range {
                let mut rng =
                    XorShift64Star::from_seed(self.cfg.seed ^ (r as u64).wrapping_mul(0x9E37_79B9));
                for x in row.iter_mut() {
                    *x = (2.0 * unit_f32(rng.next()) - 1.0) / dim as f32;
                }
                self.input.write_weights(r, &row);
            }
        });
        // Hierarchical softmax's rows start at zero as a new table holds them; so do negative
        // sampling's, written here only when they are used.
        let ns_rows = if self.cfg.negative > 0 {
            self.output.rows()
        } else {
            0
        };
        in_row_ranges(ns_rows, |range| {
            let row = vec![0.0f32; dim];
            for r in range {
                self.output.write_weights(r, &row);
            }
        });
        self.decay.set_done(0);
        self.progress_table.write_weights(0, &[0.0, 0.0]);
    }

    /// Scratch buffers for a worker reading ids from batch slot `words_at`.
    pub fn new_worker(&self, words_at: usize) -> Word2VecWorker {
        let n = self.workers.fetch_add(1, Ordering::Relaxed);
        Word2VecWorker {
            rng: XorShift64Star::from_seed(
                self.cfg.seed.wrapping_add(0x5151) ^ n.wrapping_mul(0xA24B_AED4),
            ),
            sentence: Vec::with_capacity(1024),
            pairs: Vec::with_capacity(1024 * 2 * self.cfg.window),
            windows: Vec::new(),
            contexts: Vec::new(),
            pair_negs: Vec::with_capacity(1024 * 2 * self.cfg.window * self.cfg.negative),
            l1: padded(self.cfg.dim),
            neu1e: padded(self.cfg.dim),
            row: padded(self.cfg.dim),
            words_at,
        }
    }

    /// Starts a training run of `epochs` passes over the corpus: the learning rate decays from
    /// the optimizer's to `min_lr` over its words. The executor calls it ([`Model::plan`]);
    /// before any run is started the rate stays the optimizer's.
    pub fn start_run(&self, epochs: usize) {
        self.decay
            .start(self.corpus_words.saturating_mul(epochs as u64));
    }

    /// The learning rate after `done` words of the run.
    pub fn learning_rate(&self, done: u64) -> f32 {
        let left = self.decay.scale(done);
        (self.cfg.min_lr + (self.opt.lr - self.cfg.min_lr) * left).max(self.cfg.min_lr)
    }

    /// Words of the run trained on so far (kept by `min_count`, counted before subsampling).
    pub fn words_done(&self) -> u64 {
        self.decay.done()
    }

    /// Keeps the sentence's words that pass `min_count` and subsampling (with `subsample`) in
    /// `w.sentence`; returns the number of words that pass `min_count`.
    fn filter(
        &self,
        w: &mut Word2VecWorker,
        ids: &[u64],
        instance: usize,
        subsample: bool,
    ) -> Result<u64> {
        w.sentence.clear();
        let mut known = 0;
        for (offset, &id) in ids.iter().enumerate() {
            let Some(&keep) = usize::try_from(id).ok().and_then(|i| self.keep.get(i)) else {
                return Err(Error::BadInstance {
                    slot: self.cfg.words_slot.clone(),
                    instance,
                    reason: format!(
                        "word id {id} at offset {offset} is out of range (vocabulary of {} words {})",
                        self.vocab.len(),
                        vocab_origin(&self.cfg, &self.vocab_source)
                    ),
                });
            };
            if keep == 0 {
                continue;
            }
            known += 1;
            if subsample && keep < (1 << 32) && keep <= w.rng.next() >> 32 {
                continue;
            }
            w.sentence.push(id as u32);
        }
        Ok(known)
    }

    /// One pass of the model's architecture over `w.sentence` at learning rate `alpha` (with
    /// `update` false: only the loss); returns the summed loss and the number of examples (skip-
    /// gram: (word, context) pairs; CBOW: words with a context).
    fn train_sentence(&self, w: &mut Word2VecWorker, alpha: f32, update: bool) -> (f64, u64) {
        match self.cfg.arch {
            Arch::Skipgram => self.train_skipgram(w, alpha, update),
            Arch::Cbow => self.train_cbow(w, alpha, update),
        }
    }

    /// One skip-gram pass over `w.sentence`.
    ///
    /// The pairs and their noise words are drawn first, in the order a pair-by-pair pass would
    /// draw them (so the result does not depend on it); then, while a pair trains, the rows of
    /// the pair [`PREFETCH_AHEAD`] ahead are prefetched. The output rows of noise words are
    /// random rows of a table larger than the cache: waiting on them was the largest cost.
    fn train_skipgram(&self, w: &mut Word2VecWorker, alpha: f32, update: bool) -> (f64, u64) {
        self.draw_examples(w);
        let pairs = std::mem::take(&mut w.pairs);
        let pair_negs = std::mem::take(&mut w.pair_negs);
        for k in 0..PREFETCH_AHEAD.min(pairs.len()) {
            self.prefetch_pair(&pairs, &pair_negs, k);
        }
        let mut loss = 0.0f64;
        let mut start = 0;
        for (k, &(target, input, end)) in pairs.iter().enumerate() {
            if k + PREFETCH_AHEAD < pairs.len() {
                self.prefetch_pair(&pairs, &pair_negs, k + PREFETCH_AHEAD);
            }
            let negs = &pair_negs[start..end];
            loss += self.pair_step(w, negs, target as usize, input as usize, alpha, update) as f64;
            start = end;
        }
        let count = pairs.len() as u64;
        w.pairs = pairs;
        w.pair_negs = pair_negs;
        (loss, count)
    }

    /// One CBOW pass over `w.sentence`: the words' windows and noise words drawn first, then
    /// trained with the rows of the word [`PREFETCH_AHEAD`] ahead prefetched, as
    /// [`Word2Vec::train_skipgram`] does.
    fn train_cbow(&self, w: &mut Word2VecWorker, alpha: f32, update: bool) -> (f64, u64) {
        self.draw_examples(w);
        let windows = std::mem::take(&mut w.windows);
        let contexts = std::mem::take(&mut w.contexts);
        let negs = std::mem::take(&mut w.pair_negs);
        for k in 0..PREFETCH_AHEAD.min(windows.len()) {
            self.prefetch_window(&windows, &contexts, &negs, k);
        }
        let mut loss = 0.0f64;
        let (mut context_start, mut neg_start) = (0, 0);
        for (k, &(word, context_end, neg_end)) in windows.iter().enumerate() {
            if k + PREFETCH_AHEAD < windows.len() {
                self.prefetch_window(&windows, &contexts, &negs, k + PREFETCH_AHEAD);
            }
            let context = &contexts[context_start..context_end];
            let noise = &negs[neg_start..neg_end];
            loss += self.cbow_step(w, context, noise, word as usize, alpha, update) as f64;
            (context_start, neg_start) = (context_end, neg_end);
        }
        let count = windows.len() as u64;
        w.windows = windows;
        w.contexts = contexts;
        w.pair_negs = negs;
        (loss, count)
    }

    /// The window of the word at `pos` of a sentence of `n` words: positions `lo..hi`, the word
    /// itself included, reaching `1..=window` words (drawn at random) to each side.
    #[inline(always)]
    fn draw_window(&self, rng: &mut XorShift64Star, pos: usize, n: usize) -> (usize, usize) {
        let window = self.cfg.window;
        let reduced = (rng.next() % window as u64) as usize;
        let span = window - reduced;
        (pos.saturating_sub(span), (pos + span + 1).min(n))
    }

    /// Appends `negative` noise words to `negs`, leaving out those equal to `word`.
    #[inline(always)]
    fn draw_noise(&self, rng: &mut XorShift64Star, word: u32, negs: &mut Vec<u32>) {
        for _ in 0..self.cfg.negative {
            let t = self.noise.sample(rng.next());
            if t != word {
                negs.push(t);
            }
        }
    }

    /// Draws the examples of `w.sentence`: for every word a window shrunk at random, then the
    /// noise words (the word itself left out) for every context word in it (skip-gram: into
    /// `w.pairs`) or once for the word (CBOW: into `w.windows`, its context words into
    /// `w.contexts`; a word without context words, in a sentence of one word, is left out as
    /// word2vec.c leaves it). The noise words go to `w.pair_negs`.
    fn draw_examples(&self, w: &mut Word2VecWorker) {
        w.pairs.clear();
        w.windows.clear();
        w.contexts.clear();
        w.pair_negs.clear();
        let n = w.sentence.len();
        for pos in 0..n {
            let word = w.sentence[pos];
            let (lo, hi) = self.draw_window(&mut w.rng, pos, n);
            match self.cfg.arch {
                Arch::Skipgram => {
                    for c in (lo..hi).filter(|&c| c != pos) {
                        // word2vec.c's pair: the context word's vector predicts the word.
                        // fastText's with subwords: the word's rows predict each context word,
                        // so its many rows stay in cache over its window.
                        let (target, input) = match self.word_rows {
                            None => (word, w.sentence[c]),
                            Some(_) => (w.sentence[c], word),
                        };
                        self.draw_noise(&mut w.rng, target, &mut w.pair_negs);
                        w.pairs.push((target, input, w.pair_negs.len()));
                    }
                }
                Arch::Cbow if hi - lo > 1 => {
                    w.contexts.extend_from_slice(&w.sentence[lo..pos]);
                    w.contexts.extend_from_slice(&w.sentence[pos + 1..hi]);
                    self.draw_noise(&mut w.rng, word, &mut w.pair_negs);
                    w.windows.push((word, w.contexts.len(), w.pair_negs.len()));
                }
                Arch::Cbow => {}
            }
        }
    }

    /// Prefetches the rows pair `k` reads and then writes: its context's input row, its word's
    /// and noise words' output rows, to be written (see [`Table::prefetch_weights_to_write`]).
    #[inline(always)]
    fn prefetch_pair(&self, pairs: &[(u32, u32, usize)], pair_negs: &[u32], k: usize) {
        let (target, input, end) = pairs[k];
        let start = if k == 0 { 0 } else { pairs[k - 1].2 };
        // With subwords a word's pairs follow one another and share its rows: fetched once.
        if k == 0 || self.word_rows.is_none() || pairs[k - 1].1 != input {
            self.prefetch_input(input);
        }
        self.prefetch_targets(target, &pair_negs[start..end]);
    }

    /// Prefetches, to be written, the input rows of word `id`: its own, and with subwords its
    /// n-grams'.
    #[inline(always)]
    fn prefetch_input(&self, id: u32) {
        match &self.word_rows {
            None => self.input.prefetch_weights_to_write(id as usize),
            Some(rows) => {
                for &r in rows.of(id as usize) {
                    self.input.prefetch_weights_to_write(r as usize);
                }
            }
        }
    }

    /// Prefetches the rows CBOW example `k` reads and then writes: its context words' input
    /// rows, its word's and noise words' output rows.
    #[inline(always)]
    fn prefetch_window(
        &self,
        windows: &[(u32, usize, usize)],
        contexts: &[u32],
        negs: &[u32],
        k: usize,
    ) {
        let (word, context_end, neg_end) = windows[k];
        let (context_start, neg_start) = if k == 0 {
            (0, 0)
        } else {
            (windows[k - 1].1, windows[k - 1].2)
        };
        for &c in &contexts[context_start..context_end] {
            self.prefetch_input(c);
        }
        self.prefetch_targets(word, &negs[neg_start..neg_end]);
    }

    /// Prefetches, to be written, the output rows of `word` and its noise words.
    #[inline(always)]
    fn prefetch_targets(&self, word: u32, negs: &[u32]) {
        if self.cfg.negative == 0 {
            return;
        }
        self.output.prefetch_weights_to_write(word as usize);
        for &t in negs {
            self.output.prefetch_weights_to_write(t as usize);
        }
    }

    /// Trains the input vector of word `input` to predict word `target` against the noise words
    /// `negs`; returns the pair's loss. Without subwords the input row is read once into `w.l1`
    /// and its correction gathered in `w.neu1e` ([`Word2Vec::predict`]); with subwords the input
    /// vector is the mean of the word's rows, each of which receives the whole correction
    /// (fastText's `Model::update` for skip-gram: no scaling by the number of rows).
    #[inline]
    pub(crate) fn pair_step(
        &self,
        w: &mut Word2VecWorker,
        negs: &[u32],
        target: usize,
        input: usize,
        alpha: f32,
        update: bool,
    ) -> f32 {
        if let Some(rows) = &self.word_rows {
            let rows = rows.of(input).iter().map(|&r| r as usize);
            return self.bag_step(w, rows, negs, target, alpha, update);
        }
        self.input.read_weights(input, &mut w.l1);
        let loss = self.predict(w, negs, target, alpha, update);
        if update {
            axpy(1.0, &w.neu1e, &mut w.l1);
            self.input.write_weights(input, &w.l1);
        }
        loss
    }

    /// Trains the mean of the input vectors of `contexts` (not empty) to predict `word` against
    /// the noise words `negs`, and adds the mean's correction to every context word's input
    /// vector (once per occurrence: a word twice in the window gets it twice, as in word2vec.c
    /// and gensim); returns the example's loss. With subwords the mean is over the rows of all
    /// the context words (their own and their n-grams'), each of which receives the whole
    /// correction (fastText's `cbow`).
    #[inline]
    pub(crate) fn cbow_step(
        &self,
        w: &mut Word2VecWorker,
        contexts: &[u32],
        negs: &[u32],
        word: usize,
        alpha: f32,
        update: bool,
    ) -> f32 {
        let ids = contexts.iter().map(|&c| c as usize);
        match &self.word_rows {
            None => self.bag_step(w, ids, negs, word, alpha, update),
            Some(rows) => {
                let rows = ids.flat_map(|c| rows.of(c)).map(|&r| r as usize);
                self.bag_step(w, rows, negs, word, alpha, update)
            }
        }
    }

    /// Trains the mean of input rows `rows` (at least one) to predict `word` against the noise
    /// words `negs`, and adds the mean's correction to each row (once per occurrence); returns
    /// the example's loss.
    #[inline(always)]
    fn bag_step(
        &self,
        w: &mut Word2VecWorker,
        rows: impl Iterator<Item = usize> + Clone,
        negs: &[u32],
        word: usize,
        alpha: f32,
        update: bool,
    ) -> f32 {
        self.mean_of_rows(rows.clone(), &mut w.l1);
        let loss = self.predict(w, negs, word, alpha, update);
        if update {
            for r in rows {
                self.input.read_weights(r, &mut w.row);
                axpy(1.0, &w.neu1e, &mut w.row);
                self.input.write_weights(r, &w.row);
            }
        }
        loss
    }

    /// Writes the mean of input rows `rows` to `out` (fastText's `computeHidden`: the sum, then
    /// times 1 / count; zero for no rows); returns the count.
    #[inline(always)]
    fn mean_of_rows(&self, rows: impl Iterator<Item = usize>, out: &mut [f32]) -> usize {
        out.fill(0.0);
        let mut n = 0;
        for r in rows {
            self.input.add_weights_to(r, 1.0, out);
            n += 1;
        }
        if n > 1 {
            let inv = 1.0 / n as f32;
            for x in out.iter_mut() {
                *x *= inv;
            }
        }
        n
    }

    /// The input vector of vocabulary word `id` (`dim` values into `out`): its row, or with
    /// subwords the mean of its row and its n-grams' rows. What [`Word2Vec::export_text`] writes.
    pub fn word_vector(&self, id: usize, out: &mut [f32]) {
        match &self.word_rows {
            None => self.input.read_weights(id, out),
            Some(rows) => {
                self.mean_of_rows(rows.of(id).iter().map(|&r| r as usize), out);
            }
        }
    }

    /// The mean of the rows of `word`'s character n-grams into `out` (`dim` values), whatever
    /// word it is: fastText's vector of a word outside its vocabulary, zero when the word has no
    /// n-gram of `minn..=maxn` characters. Returns the number of n-grams, or `None` for a model
    /// without subwords, whose vocabulary words alone have vectors.
    pub fn ngram_vector(&self, word: &str, out: &mut [f32]) -> Option<usize> {
        let rows = self.word_rows.as_ref()?;
        let mut ids = Vec::new();
        rows.of_text(word, &mut ids);
        Some(self.mean_of_rows(ids.iter().map(|&r| r as usize), out))
    }

    /// The character n-grams of the model's words (`minn`, `maxn`, `subword_buckets`), if any.
    pub fn subwords(&self) -> Option<Subwords> {
        self.word_rows.as_ref().map(WordRows::subwords)
    }

    /// Trains the hidden vector `w.l1` to predict `word`: through its way down the tree (with
    /// `hs`), then against the noise words `negs` (with `negative`); updates their output rows
    /// and leaves `w.l1`'s correction in `w.neu1e`; returns the loss.
    #[inline(always)]
    fn predict(
        &self,
        w: &mut Word2VecWorker,
        negs: &[u32],
        word: usize,
        alpha: f32,
        update: bool,
    ) -> f32 {
        w.neu1e.fill(0.0);
        let mut loss = 0.0f32;
        if let Some(hs) = &self.hs {
            // word2vec.c's rule: at each inner node, the label is 1 for the first child and 0
            // for the second.
            let way = hs.tree.points(word).iter().zip(hs.tree.codes(word));
            for (&node, &second) in way {
                let label = if second { 0.0 } else { 1.0 };
                loss += self.binary_step(w, &hs.table, node as usize, label, alpha, update);
            }
        }
        if self.cfg.negative > 0 {
            loss += self.binary_step(w, &self.output, word, 1.0, alpha, update);
            for &t in negs {
                loss += self.binary_step(w, &self.output, t as usize, 0.0, alpha, update);
            }
        }
        loss
    }

    /// One logistic decision of `w.l1` against row `target` of `table` with `label` (1: the
    /// word, or the first child of a tree node; 0: noise, or the second child): updates the row
    /// (read into `w.row` and written back once), adds `w.l1`'s correction to `w.neu1e`, and
    /// returns the decision's loss.
    #[inline(always)]
    fn binary_step(
        &self,
        w: &mut Word2VecWorker,
        table: &Table,
        target: usize,
        label: f32,
        alpha: f32,
        update: bool,
    ) -> f32 {
        table.read_weights(target, &mut w.row);
        let f = dot(&w.l1, &w.row);
        // With e = exp(-f): sigmoid(f) = 1 / (1 + e), -log(sigmoid(f)) = ln(1 + e) for label 1
        // and -log(sigmoid(-f)) = f + ln(1 + e) for label 0; both are taken at f clamped to
        // +-MAX_EXP, where ln(1 + exp(-f)) is -f (below) or about 0 (above) to within 0.003.
        let fc = f.clamp(-MAX_EXP, MAX_EXP);
        let e = (-fc).exp();
        let softplus = self.softplus.at(fc) + (fc - f).max(0.0); // ln(1 + exp(-f))
        let loss = softplus + (1.0 - label) * f;
        // Saturated decisions are left alone, as word2vec.c and gensim leave them.
        if update && f == fc {
            let p = 1.0 / (1.0 + e);
            let g = (label - p) * alpha;
            axpy(g, &w.row, &mut w.neu1e);
            axpy(g, &w.l1, &mut w.row);
            table.write_weights(target, &w.row);
        }
        loss
    }

    /// Trains on one sentence of ids; returns its summed loss and its number of examples
    /// ((word, context) pairs in skip-gram, words with a context in CBOW).
    pub fn train_sentence_ids(&self, w: &mut Word2VecWorker, ids: &[u64]) -> Result<(f64, u64)> {
        let known = self.filter(w, ids, 0, true)?;
        let done = self.decay.advance(known);
        let alpha = self.learning_rate(done);
        self.effective
            .fetch_add(w.sentence.len() as u64, Ordering::Relaxed);
        Ok(self.train_sentence(w, alpha, true))
    }

    /// Writes the vectors of the ids kept by `min_count`, most frequent first, in word2vec's
    /// text format: a `count dim` header, then `word v1 ... v_dim` per line, to `path` (replaced
    /// whole, see [`crate::files`]). Returns the count.
    pub fn export_text(&self, path: &Path) -> Result<usize> {
        let mut out = Output::create(path)?;
        let n = self.write_text(&mut out)?;
        out.commit()?;
        Ok(n)
    }

    /// The ids whose vectors [`Word2Vec::export_text`] writes, in its order: those kept by
    /// `min_count`, most frequent first (ties by id). A tool that restricts itself to the first
    /// words of a vectors file (gensim's `restrict_vocab`) takes the most frequent.
    pub fn exported_ids(&self) -> Vec<usize> {
        let min_count = self.cfg.min_count.max(1);
        let mut ids: Vec<usize> = (0..self.vocab.len())
            .filter(|&i| self.vocab.counts[i] >= min_count)
            .collect();
        ids.sort_by(|&a, &b| {
            self.vocab.counts[b]
                .cmp(&self.vocab.counts[a])
                .then(a.cmp(&b))
        });
        ids
    }

    /// Writes what [`Word2Vec::export_text`] writes to `out`; the caller commits it.
    pub fn write_text(&self, out: &mut Output) -> Result<usize> {
        let ids = self.exported_ids();
        let name = out.name().to_string();
        let io = |e: std::io::Error| Error::Io {
            path: name.clone(),
            message: format!("cannot write vectors: {e}"),
        };
        writeln!(out, "{} {}", ids.len(), self.cfg.dim).map_err(io)?;
        let mut row = vec![0.0f32; self.cfg.dim];
        let mut line = String::new();
        for &i in &ids {
            self.word_vector(i, &mut row);
            vector_line(&mut line, &self.vocab.words[i], &row);
            out.write_all(line.as_bytes()).map_err(io)?;
        }
        Ok(ids.len())
    }

    fn save_progress(&self) {
        let done = self.decay.done();
        self.progress_table.write_weights(
            0,
            &[
                f32::from_bits(done as u32),
                f32::from_bits((done >> 32) as u32),
            ],
        );
    }
}

/// Replaces `line` with a line of word2vec's text format: `word v1 ... v_dim` (six decimals)
/// and a newline.
pub fn vector_line(line: &mut String, word: &str, values: &[f32]) {
    use std::fmt::Write as _;
    line.clear();
    line.push_str(word);
    for x in values {
        let _ = write!(line, " {x:.6}");
    }
    line.push('\n');
}

/// Where a vocabulary came from, for errors: `in <file>` or `stored in <checkpoint>`.
fn vocab_origin(cfg: &Word2VecConfig, source: &VocabSource) -> String {
    match source {
        VocabSource::Given => format!("in {}", cfg.vocab_file.display()),
        VocabSource::Checkpoint(path) => format!("stored in {}", path.display()),
        VocabSource::File { file, .. } => format!("in {}", file.display()),
    }
}

/// The dot product, in 8 independent lanes so the compiler vectorises it (also the vector
/// queries' similarity, `crate::vectors`).
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `y += a * x`.
#[inline(always)]
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

const METRICS: &[&str] = &["loss", "words"];

impl Model for Word2Vec {
    type Worker = Word2VecWorker;

    /// `loss`: the mean loss per example (negative sampling's, plus hierarchical softmax's) ((word, context) pair in skip-gram,
    /// word with a context in CBOW); `words`: the mean words kept per sentence (after
    /// `min_count` and subsampling).
    fn metrics(&self) -> Vec<String> {
        METRICS.iter().map(|s| s.to_string()).collect()
    }

    fn startup(&self) {
        self.init();
    }

    /// The learning rate decays over the run's epochs of the corpus (its words are known from
    /// the vocabulary's counts).
    fn plan(&self, plan: &RunPlan<'_>) -> Result<()> {
        self.start_run(plan.total);
        self.decay
            .set_done(self.corpus_words.saturating_mul(plan.before as u64));
        Ok(())
    }

    fn worker(&self, desc: &DataFeedDesc) -> Result<Word2VecWorker> {
        Ok(self.new_worker(words_position(desc, &self.cfg.words_slot)?))
    }

    /// Word ids within the vocabulary (without subsampling: nothing random is drawn).
    fn check_instance(&self, w: &mut Word2VecWorker, batch: &Batch, i: usize) -> Result<()> {
        let ids = batch.slots[w.words_at].u64s(i).unwrap_or(&[]);
        self.filter(w, ids, i, false).map(|_| ())
    }

    fn train_batch(
        &self,
        w: &mut Word2VecWorker,
        batch: &Batch,
        out: &mut [f64],
        stages: Option<&mut StageTimes>,
    ) -> Result<()> {
        let t0 = stages.as_ref().map(|_| Instant::now());
        let (mut loss, mut examples, mut words) = (0.0f64, 0u64, 0u64);
        for i in 0..batch.len {
            let ids = batch.slots[w.words_at].u64s(i).unwrap_or(&[]);
            let known = self.filter(w, ids, i, true)?;
            let done = self.decay.advance(known);
            let alpha = self.learning_rate(done);
            let (l, p) = self.train_sentence(w, alpha, true);
            loss += l;
            examples += p;
            words += w.sentence.len() as u64;
        }
        self.effective.fetch_add(words, Ordering::Relaxed);
        if let (Some(st), Some(t0)) = (stages, t0) {
            // Forward, backward and update are fused per pair: all of it counts as update.
            st.update += t0.elapsed();
        }
        out[0] = loss / examples.max(1) as f64;
        out[1] = words as f64 / batch.len.max(1) as f64;
        Ok(())
    }

    fn eval_batch(
        &self,
        w: &mut Word2VecWorker,
        batch: &Batch,
        out: &mut [f64],
        mut predictions: Option<&mut String>,
    ) -> Result<()> {
        let (mut loss, mut examples, mut words) = (0.0f64, 0u64, 0u64);
        let dim = self.cfg.dim;
        let (mut mean, mut one) = (vec![0.0f32; dim], vec![0.0f32; dim]);
        for i in 0..batch.len {
            let ids = batch.slots[w.words_at].u64s(i).unwrap_or(&[]);
            self.filter(w, ids, i, false)?;
            let (l, p) = self.train_sentence(w, 0.0, false);
            loss += l;
            examples += p;
            words += w.sentence.len() as u64;
            if let Some(text) = predictions.as_deref_mut() {
                use std::fmt::Write as _;
                mean.fill(0.0);
                for &id in &w.sentence {
                    self.word_vector(id as usize, &mut one);
                    axpy(1.0, &one, &mut mean);
                }
                let inv = 1.0 / w.sentence.len().max(1) as f32;
                for (k, x) in mean.iter().enumerate() {
                    let sep = if k + 1 == dim { '\n' } else { ' ' };
                    let _ = write!(text, "{:.6}{sep}", x * inv);
                }
            }
        }
        out[0] = loss / examples.max(1) as f64;
        out[1] = words as f64 / batch.len.max(1) as f64;
        Ok(())
    }

    /// The vectors and the progress table (refreshed first, so a checkpoint holds the progress).
    fn tables(&self) -> Vec<&Table> {
        self.save_progress();
        let mut tables = vec![&self.input, &self.output];
        tables.extend(self.hs.as_ref().map(|hs| &hs.table));
        tables.push(&self.progress_table);
        tables
    }

    fn describe(&self) -> String {
        ModelConfig {
            model: ModelKind::Word2vec(self.cfg.clone()),
            optimizer: self.opt.describe(),
        }
        .to_toml()
    }

    /// The vocabulary: the word of every row, and the counts that subsampling, the noise
    /// distribution and the exported words' order come from.
    fn sections(&self) -> Vec<Section> {
        vec![Section {
            name: VOCAB_SECTION.into(),
            bytes: self.vocab.to_bytes(),
        }]
    }

    /// `effective_words`: the words trained on (after subsampling) since the last call, when
    /// there were any.
    fn run_metrics(&self) -> Vec<(&'static str, f64)> {
        let words = self.effective.swap(0, Ordering::Relaxed);
        (words > 0)
            .then_some(("effective_words", words as f64))
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
mod tests;
