//! Converters from common text formats to MultiSlot lines, each with its matching
//! `DataFeedDesc` (`hogwild convert` writes it as `data.prototxt`).
//!
//! | format | input line | slots |
//! |---|---|---|
//! | fastText | `__label__a __label__b some words` | `words` (uint64), `label` (uint64) |
//! | libsvm | `label idx:val ...` | `label` (float), `ids` (uint64), `values` (float) |
//! | libffm | `label field:idx:val ...` | `label`, `fields` (uint64), `ids`, `values` |
//! | VW | `label [importance] ['tag]\|ns[:scale] f[:v] ... \|ns2 ...` | `label`, `weight`, `ids` (hashed `ns^f`), `values` (`v` times the namespace's scale) |
//! | CSV | header, then rows | the label column (float), one uint64 slot per feature column (hashed) |
//!
//! MultiSlot needs at least one value per slot, so an instance without features gets the single
//! padding feature id 0 (value 0.0), and a fastText line without words gets word id 0.
//!
//! The CTR models (`lr`, `fm`) read every uint64 slot as a categorical field by default; the
//! values, libffm's field numbers and VW's importance weights need the `[model]` keys that
//! [`libsvm_ctr_keys`] and [`vw_ctr_keys`] give (`hogwild convert` prints them). What no model
//! reads is an error naming the file and line: a value that is not a finite number, a VW
//! initial prediction (`base`), a negative importance weight.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;

use crate::feed::{DataFeedDesc, Slot, SlotType};
use crate::files::Output;
use crate::rng::fasttext_bigram;
use crate::subwords::Subwords;
use crate::{Error, Result};

/// Batch size written into converted descs.
pub const DEFAULT_BATCH_SIZE: i32 = 32;

// The hashes that give converted ids (fastText's word hash for its words, FNV-1a 64 for hashed
// feature ids) live with the crate's other mixers; here too because they define this module's
// output.
pub use crate::rng::{fasttext_hash, fnv1a64};

/// Word and label ids for fastText-style input.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vocabulary {
    words: HashMap<String, u64>,
    word_list: Vec<String>,
    labels: HashMap<String, u64>,
    label_list: Vec<String>,
    /// The character n-grams the data converted with it holds (its `subwords` line).
    subwords: Option<Subwords>,
    /// Per label: how often it occurs in the scanned input (`None`: loaded from a vocabulary
    /// written before counts were kept).
    label_counts: Option<Vec<u64>>,
}

/// The reserved word id for unknown words and padding in vocabulary mode.
pub const UNKNOWN_WORD: u64 = 0;
const LABEL_PREFIX: &str = "__label__";

impl Vocabulary {
    /// Word ids in use: known words are `1..=len`, `0` is unknown/padding.
    pub fn word_ids(&self) -> u64 {
        self.word_list.len() as u64 + 1
    }

    /// The id of `word` (from 1), or `None` for a word the vocabulary lacks (converted to
    /// [`UNKNOWN_WORD`]).
    pub fn word_id(&self, word: &str) -> Option<u64> {
        self.words.get(word).copied()
    }

    /// The word of id `id` (from 1; 0 is the unknown word, which has none).
    pub fn word(&self, id: u64) -> Option<&str> {
        let index = usize::try_from(id.checked_sub(1)?).ok()?;
        self.word_list.get(index).map(String::as_str)
    }

    /// The id of `label` (with its `__label__` prefix), from 0.
    pub fn label_id(&self, label: &str) -> Option<u64> {
        self.labels.get(label).copied()
    }

    /// Number of labels (ids `0..labels`).
    pub fn labels(&self) -> usize {
        self.label_list.len()
    }

    /// The label names in id order (with their `__label__` prefix).
    pub fn label_names(&self) -> &[String] {
        &self.label_list
    }

    /// How often each label occurs in the input the vocabulary was built from, in id order
    /// (`None` for a vocabulary file without counts).
    pub fn label_counts(&self) -> Option<&[u64]> {
        self.label_counts.as_deref()
    }

    fn add_word(&mut self, word: &str) {
        if !self.words.contains_key(word) {
            self.word_list.push(word.to_string());
            self.words
                .insert(word.to_string(), self.word_list.len() as u64);
        }
    }

    /// Adds `label`, or counts it again when it is known; `count` more occurrences.
    fn add_label(&mut self, label: &str, count: Option<u64>) {
        let id = match self.labels.get(label) {
            Some(&id) => id as usize,
            None => {
                self.labels
                    .insert(label.to_string(), self.label_list.len() as u64);
                self.label_list.push(label.to_string());
                self.label_list.len() - 1
            }
        };
        if let (Some(counts), Some(count)) = (&mut self.label_counts, count) {
            counts.resize(self.label_list.len(), 0);
            counts[id] += count;
        }
    }

    /// The character n-grams of the data converted with this vocabulary: the training data's,
    /// which the test data must repeat for its ids to mean the same.
    pub fn subwords(&self) -> Option<Subwords> {
        self.subwords
    }

    /// Records the character n-grams of the data converted with this vocabulary.
    pub fn set_subwords(&mut self, subwords: Option<Subwords>) {
        self.subwords = subwords;
    }

    /// Collects labels (and words, if `with_words`) from fastText-style input, in order of first
    /// appearance, and counts the labels.
    pub fn scan(&mut self, input: impl BufRead, name: &str, with_words: bool) -> Result<()> {
        if self.label_list.is_empty() {
            self.label_counts = Some(Vec::new());
        }
        for line in input.lines() {
            let line = line.map_err(|e| Error::io(name, &e))?;
            for token in line.split_whitespace() {
                if token.starts_with(LABEL_PREFIX) {
                    self.add_label(token, Some(1));
                } else if with_words {
                    self.add_word(token);
                }
            }
        }
        Ok(())
    }

    /// Writes the vocabulary to `path` (replaced whole, see [`crate::files`]):
    /// `label<TAB>name<TAB>count` and `word<TAB>token` lines, ids in line order, after a
    /// `subwords<TAB>minn<TAB>maxn<TAB>buckets` line when the data has character n-grams.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let mut out = Output::create(path)?;
        self.write(&mut out)?;
        out.commit()
    }

    /// Writes what [`Vocabulary::save`] writes to `out`; the caller commits it.
    pub fn write(&self, out: &mut Output) -> Result<()> {
        let name = out.name().to_string();
        let io = |e: std::io::Error| Error::io(&name, &e);
        if let Some(sw) = &self.subwords {
            let (minn, maxn, buckets) = (sw.minn(), sw.maxn(), sw.buckets());
            writeln!(out, "subwords\t{minn}\t{maxn}\t{buckets}").map_err(io)?;
        }
        for (id, label) in self.label_list.iter().enumerate() {
            match self.label_counts.as_ref().and_then(|c| c.get(id)) {
                Some(count) => writeln!(out, "label\t{label}\t{count}"),
                None => writeln!(out, "label\t{label}"),
            }
            .map_err(io)?;
        }
        for word in &self.word_list {
            writeln!(out, "word\t{word}").map_err(io)?;
        }
        Ok(())
    }

    /// Reads a vocabulary written by [`Vocabulary::save`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(&name, &e))?;
        let mut vocab = Vocabulary::default();
        // Counts when every label line has one (files written before counts were kept have none).
        let mut counted = None;
        for (i, line) in text.lines().enumerate() {
            let bad = |message: String| Error::Convert {
                file: name.clone(),
                line: i as u64 + 1,
                message,
            };
            match line.split_once('\t') {
                Some(("label", label)) => {
                    let (label, count) = match label.split_once('\t') {
                        Some((label, count)) => {
                            let count = count.parse::<u64>().map_err(|e| {
                                bad(format!("label {label}: \"{count}\" is no count: {e}"))
                            })?;
                            (label, Some(count))
                        }
                        None => (label, None),
                    };
                    if *counted.get_or_insert(count.is_some()) != count.is_some() {
                        return Err(bad(format!(
                            "label {label} {} a count, unlike the first label line",
                            if count.is_some() { "has" } else { "lacks" }
                        )));
                    }
                    if count.is_some() && vocab.label_counts.is_none() {
                        vocab.label_counts = Some(Vec::new());
                    }
                    vocab.add_label(label, count);
                }
                Some(("word", word)) => vocab.add_word(word),
                Some(("subwords", settings)) => {
                    vocab.subwords = Some(parse_subwords(settings).map_err(bad)?)
                }
                _ => {
                    return Err(bad(format!(
                        "expected \"label<TAB>name<TAB>count\", \"word<TAB>token\" or \
                         \"subwords<TAB>minn<TAB>maxn<TAB>buckets\", got \"{line}\""
                    )))
                }
            }
        }
        Ok(vocab)
    }
}

/// A vocabulary's `subwords` line after its tab: `minn<TAB>maxn<TAB>buckets`.
fn parse_subwords(settings: &str) -> std::result::Result<Subwords, String> {
    let fields: Vec<&str> = settings.split('\t').collect();
    let [minn, maxn, buckets] = fields[..] else {
        return Err(format!(
            "expected \"subwords<TAB>minn<TAB>maxn<TAB>buckets\", got \"subwords\t{settings}\""
        ));
    };
    let minn = parse_u64(minn, "minn")?;
    let maxn = parse_u64(maxn, "maxn")?;
    let buckets = parse_u64(buckets, "buckets")?;
    Subwords::new(minn as usize, maxn as usize, buckets).map_err(|e| match e {
        Error::InvalidConfig { field, reason } => format!("{field}: {reason}"),
        e => e.to_string(),
    })
}

/// How fastText-style words become ids.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum WordIds {
    /// Known words get their vocabulary id, unknown words [`UNKNOWN_WORD`] (the default).
    #[default]
    Vocabulary,
    /// `fasttext_hash(word) % buckets` (no vocabulary needed for words).
    Hashed {
        /// The number of hash buckets.
        buckets: u64,
    },
}

/// Options of the fastText converter. The default converts words with the vocabulary, without
/// bigrams or subwords:
///
/// ```
/// use hogwild::tools::convert::{FastTextOptions, Vocabulary};
///
/// let text = "__label__pos a fine film\n__label__neg a dull film\n";
/// let mut vocab = Vocabulary::default();
/// vocab.scan(text.as_bytes(), "train.txt", true)?;
/// let opts = FastTextOptions { bigram_buckets: Some(100), ..FastTextOptions::default() };
/// let mut out = Vec::new();
/// opts.convert(&vocab, text.as_bytes(), "train.txt", &mut out)?;
/// // words 1..=4 (0 is the unknown word), then bigram ids from word_ids() = 5 on
/// assert_eq!(vocab.word_id("dull"), Some(4));
/// assert!(String::from_utf8(out).unwrap().starts_with("5 1 2 3 "));
/// assert_eq!(opts.id_space(&vocab), 5 + 100); // the bag-of-words model's `vocab`
/// # Ok::<(), hogwild::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FastTextOptions {
    /// Vocabulary or hashing for words.
    pub word_ids: WordIds,
    /// `Some(buckets)`: add word bigrams as fastText does: id = word id space +
    /// (bigram hash % buckets).
    pub bigram_buckets: Option<u64>,
    /// Each word followed by the buckets of its character n-grams, as fastText's lines hold them:
    /// id = [`FastTextOptions::id_space`] + bucket. A word the vocabulary lacks is its n-grams
    /// alone (id 0 when it has none), as fastText reads an unknown word.
    pub subwords: Option<Subwords>,
}

impl FastTextOptions {
    /// The ids of words: `0..word_space` (the vocabulary's ids, or the hash buckets).
    fn word_space(&self, vocab: &Vocabulary) -> u64 {
        match self.word_ids {
            WordIds::Vocabulary => vocab.word_ids(),
            WordIds::Hashed { buckets } => buckets.max(1),
        }
    }

    /// The ids of words and bigrams that [`FastTextOptions::convert`] writes with `vocab`: the words, then
    /// the bigram buckets; n-gram buckets follow. This is the bag-of-words model's `vocab` for the
    /// converted data (its end-of-text row is no id of the data and comes on top), and its
    /// `subword_buckets` are the n-grams' buckets.
    pub fn id_space(&self, vocab: &Vocabulary) -> usize {
        (self.word_space(vocab) + self.bigram_buckets.map_or(0, |b| b.max(1))) as usize
    }

    /// Converts fastText-style lines of `input` (named `name` in errors) to MultiSlot lines
    /// ([`fasttext_desc`]'s `words` and `label`) written to `out`, with `vocab` (labels must be
    /// known to it); returns the lines converted.
    pub fn convert(
        &self,
        vocab: &Vocabulary,
        input: impl BufRead,
        name: &str,
        mut out: impl Write,
    ) -> Result<u64> {
        let word_space = self.word_space(vocab);
        let mut words = Vec::new();
        let mut hashes = Vec::new();
        let mut labels = Vec::new();
        // A blank line has no label: an error, as any line without one.
        convert_lines(input, name, false, |line, err| {
            words.clear();
            hashes.clear();
            labels.clear();
            for token in line.split_whitespace() {
                if token.starts_with(LABEL_PREFIX) {
                    let id = vocab
                        .labels
                        .get(token)
                        .ok_or_else(|| err(format!("unknown label \"{token}\"")))?;
                    labels.push(*id);
                    continue;
                }
                self.push_word(vocab, token, &mut words, &mut hashes);
            }
            if labels.is_empty() {
                return Err(err("no __label__ on the line".to_string()));
            }
            self.push_bigrams(word_space, &hashes, &mut words);
            if words.is_empty() {
                words.push(UNKNOWN_WORD);
            }
            write_slot(&mut out, &words, name)?;
            write_slot(&mut out, &labels, name)?;
            end_line(&mut out, name)
        })
    }

    /// The word ids of one line of text as [`FastTextOptions::convert`] writes them (its
    /// `words` slot), `__label__` tokens skipped: what a bag-of-words model trained on the
    /// converted data reads (see [`crate::models::Bow::predict_text`]).
    pub fn text_ids(&self, vocab: &Vocabulary, text: &str) -> Vec<u64> {
        let (mut words, mut hashes) = (Vec::new(), Vec::new());
        for token in text.split_whitespace() {
            if !token.starts_with(LABEL_PREFIX) {
                self.push_word(vocab, token, &mut words, &mut hashes);
            }
        }
        self.push_bigrams(self.word_space(vocab), &hashes, &mut words);
        if words.is_empty() {
            words.push(UNKNOWN_WORD);
        }
        words
    }

    /// Appends the ids of `token` (a word) to `words` and its hash to `hashes`.
    fn push_word(
        &self,
        vocab: &Vocabulary,
        token: &str,
        words: &mut Vec<u64>,
        hashes: &mut Vec<u32>,
    ) {
        let hash = fasttext_hash(token);
        hashes.push(hash);
        let id = match self.word_ids {
            WordIds::Vocabulary => vocab.words.get(token).copied(),
            WordIds::Hashed { buckets } => Some(u64::from(hash) % buckets.max(1)),
        };
        let before = words.len();
        words.extend(id);
        if let Some(sw) = &self.subwords {
            sw.push_ids(token, self.id_space(vocab) as u64, words);
        }
        if words.len() == before {
            words.push(UNKNOWN_WORD);
        }
    }

    /// Appends the bigram ids of a line's word `hashes` to `words`, when bigrams are on.
    fn push_bigrams(&self, word_space: u64, hashes: &[u32], words: &mut Vec<u64>) {
        if let Some(buckets) = self.bigram_buckets {
            for pair in hashes.windows(2) {
                // fastText: uint64 h = int32 hash; h = h * 116049371 + next int32 hash.
                let h = fasttext_bigram(pair[0] as i32 as i64 as u64, pair[1] as i32 as i64 as u64);
                words.push(word_space + h % buckets.max(1));
            }
        }
    }
}

/// The desc of fastText output: `words` and `label`, both uint64.
pub fn fasttext_desc() -> DataFeedDesc {
    DataFeedDesc::multi_slot(
        DEFAULT_BATCH_SIZE,
        vec![
            Slot::sparse("words", SlotType::U64),
            Slot::sparse("label", SlotType::U64),
        ],
    )
}

/// Converts `input` (named `name`) line by line with `convert`, which gets each line (blank ones
/// skipped when `skip_blank`) and a maker of errors naming the file and the line. Returns the
/// lines converted.
fn convert_lines(
    input: impl BufRead,
    name: &str,
    skip_blank: bool,
    mut convert: impl FnMut(&str, &dyn Fn(String) -> Error) -> Result<()>,
) -> Result<u64> {
    let mut lines = 0;
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| Error::io(name, &e))?;
        if skip_blank && line.trim().is_empty() {
            continue;
        }
        let err = |message: String| Error::Convert {
            file: name.to_string(),
            line: i as u64 + 1,
            message,
        };
        convert(&line, &err)?;
        lines += 1;
    }
    Ok(lines)
}

fn write_slot<T: std::fmt::Display>(out: &mut impl Write, values: &[T], name: &str) -> Result<()> {
    let io = |e: std::io::Error| Error::io(format!("output of {name}"), &e);
    write!(out, "{}", values.len()).map_err(io)?;
    for v in values {
        write!(out, " {v}").map_err(io)?;
    }
    out.write_all(b" ").map_err(io)
}

fn end_line(out: &mut impl Write, name: &str) -> Result<()> {
    out.write_all(b"\n")
        .map_err(|e| Error::io(format!("output of {name}"), &e))
}

fn parse_f32(text: &str, what: &str) -> std::result::Result<f32, String> {
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{what} \"{text}\" is not a finite number")),
    }
}

fn parse_u64(text: &str, what: &str) -> std::result::Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("{what} \"{text}\" is not an unsigned integer"))
}

/// Sparse features of one instance.
#[derive(Default)]
struct Features {
    fields: Vec<u64>,
    ids: Vec<u64>,
    values: Vec<f32>,
}

impl Features {
    fn clear(&mut self) {
        self.fields.clear();
        self.ids.clear();
        self.values.clear();
    }

    fn pad(&mut self) {
        if self.ids.is_empty() {
            self.fields.push(0);
            self.ids.push(0);
            self.values.push(0.0);
        }
    }
}

/// Converts libsvm (`ffm: false`: `label idx:val ...`) or libffm (`ffm: true`:
/// `label field:idx:val ...`) lines.
pub fn convert_libsvm(
    input: impl BufRead,
    name: &str,
    mut out: impl Write,
    ffm: bool,
) -> Result<u64> {
    let mut features = Features::default();
    convert_lines(input, name, true, |line, err| {
        let mut tokens = line.split_whitespace();
        let label = parse_f32(tokens.next().unwrap_or(""), "label").map_err(err)?;
        features.clear();
        for token in tokens {
            let parts: Vec<&str> = token.split(':').collect();
            let (field, id, value) = match (ffm, parts.as_slice()) {
                (false, [id, value]) => ("0", *id, *value),
                (true, [field, id, value]) => (*field, *id, *value),
                _ => {
                    let shape = if ffm {
                        "field:index:value"
                    } else {
                        "index:value"
                    };
                    return Err(err(format!("feature \"{token}\" is not {shape}")));
                }
            };
            features
                .fields
                .push(parse_u64(field, "field").map_err(err)?);
            features.ids.push(parse_u64(id, "index").map_err(err)?);
            features
                .values
                .push(parse_f32(value, "value").map_err(err)?);
        }
        features.pad();
        write_slot(&mut out, &[label], name)?;
        if ffm {
            write_slot(&mut out, &features.fields, name)?;
        }
        write_slot(&mut out, &features.ids, name)?;
        write_slot(&mut out, &features.values, name)?;
        end_line(&mut out, name)
    })
}

/// The `[model]` keys with which `lr` and `fm` read every slot of libsvm (`ffm: false`) or
/// libffm output: each id's value and, for libffm, each id's field number. Without them every
/// id has value 1 and libffm's field numbers are one more categorical field.
pub fn libsvm_ctr_keys(ffm: bool) -> &'static str {
    if ffm {
        "values = { ids = \"values\" }\nfield_numbers = { ids = \"fields\" }\n"
    } else {
        "values = { ids = \"values\" }\n"
    }
}

/// The desc of libsvm (`ffm: false`) or libffm output.
pub fn libsvm_desc(ffm: bool) -> DataFeedDesc {
    let mut slots = vec![Slot::sparse("label", SlotType::F32)];
    if ffm {
        slots.push(Slot::sparse("fields", SlotType::U64));
    }
    slots.push(Slot::sparse("ids", SlotType::U64));
    slots.push(Slot::sparse("values", SlotType::F32));
    DataFeedDesc::multi_slot(DEFAULT_BATCH_SIZE, slots)
}

/// Converts Vowpal Wabbit text lines; feature ids are `fnv1a64("ns^feature") % buckets` (VW's own
/// murmur hash is not reproduced).
pub fn convert_vw(
    input: impl BufRead,
    name: &str,
    mut out: impl Write,
    buckets: u64,
) -> Result<u64> {
    let buckets = buckets.max(1);
    let mut features = Features::default();
    let mut key = Vec::new();
    convert_lines(input, name, true, |line, err| {
        let (head, body) = line
            .split_once('|')
            .ok_or_else(|| err("no '|' before the features".to_string()))?;
        let (label, weight) = vw_head(head).map_err(err)?;
        features.clear();
        for namespace in body.split('|') {
            let (ns, feats) = if namespace.starts_with([' ', '\t']) || namespace.is_empty() {
                ("", namespace)
            } else {
                namespace.split_once([' ', '\t']).unwrap_or((namespace, ""))
            };
            // A namespace may carry a scale, which multiplies its features' values: `ns:2.0`.
            let ns_token = ns;
            let (ns, scale) = match ns.split_once(':') {
                Some((ns, scale)) => (ns, parse_f32(scale, "namespace scale").map_err(err)?),
                None => (ns, 1.0),
            };
            for feat in feats.split_whitespace() {
                let (fname, value) = match feat.rsplit_once(':') {
                    Some((f, v)) => (f, parse_f32(v, "value").map_err(err)?),
                    None => (feat, 1.0),
                };
                let value = scale * value;
                if !value.is_finite() {
                    return Err(err(format!(
                        "value of \"{feat}\" scaled by namespace \"{ns_token}\" is not finite"
                    )));
                }
                key.clear();
                key.extend_from_slice(ns.as_bytes());
                key.push(b'^');
                key.extend_from_slice(fname.as_bytes());
                features.ids.push(fnv1a64(&key) % buckets);
                features.values.push(value);
            }
        }
        features.pad();
        write_slot(&mut out, &[label], name)?;
        write_slot(&mut out, &[weight], name)?;
        write_slot(&mut out, &features.ids, name)?;
        write_slot(&mut out, &features.values, name)?;
        end_line(&mut out, name)
    })
}

/// The `[model]` keys with which `lr` and `fm` read every slot of VW output: each feature's
/// value and each instance's importance weight. Without them every feature has value 1 and
/// every instance weight 1.
pub fn vw_ctr_keys() -> &'static str {
    "values = { ids = \"values\" }\nweight_slot = \"weight\"\n"
}

/// The label and importance weight of a VW line's part before the first `|`:
/// `label [importance [base]] [tag]`. As in VW, the tag is the last token when it starts with
/// `'` or touches the `|`.
fn vw_head(head: &str) -> std::result::Result<(f32, f32), String> {
    let mut tokens: Vec<&str> = head.split_whitespace().collect();
    let touching = !head.is_empty() && !head.ends_with([' ', '\t']);
    if touching || tokens.last().is_some_and(|t| t.starts_with('\'')) {
        let tag = tokens.pop().unwrap_or_default();
        if tokens.is_empty() {
            return Err(format!(
                "no label before the tag \"{tag}\" (VW's tag: the last token, when it starts \
                 with ' or touches the '|')"
            ));
        }
    }
    let label = parse_f32(tokens.first().ok_or("no label")?, "label")?;
    let weight = match tokens.get(1) {
        Some(t) => parse_f32(t, "importance")?,
        None => 1.0,
    };
    if weight < 0.0 {
        return Err(format!("importance {weight} is negative"));
    }
    match tokens.get(2..) {
        Some([base, ..]) => Err(format!(
            "initial prediction (base) \"{base}\": the CTR models have none; remove it"
        )),
        _ => Ok((label, weight)),
    }
}

/// The desc of VW output.
pub fn vw_desc() -> DataFeedDesc {
    DataFeedDesc::multi_slot(
        DEFAULT_BATCH_SIZE,
        vec![
            Slot::sparse("label", SlotType::F32),
            Slot::sparse("weight", SlotType::F32),
            Slot::sparse("ids", SlotType::U64),
            Slot::sparse("values", SlotType::F32),
        ],
    )
}

/// Options of the CSV converter.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvOptions {
    /// The label column's name (a number per row).
    pub label: String,
    /// Feature columns (`None`: every column but the label).
    pub columns: Option<Vec<String>>,
    /// Ids are `fnv1a64("column=value") % buckets`.
    pub buckets: u64,
    /// Field delimiter.
    pub delimiter: u8,
}

/// Converts CSV with a header: the label column becomes a float slot, each feature column a
/// uint64 slot of one hashed id. Returns the lines written and the matching desc.
pub fn convert_csv(
    input: impl std::io::Read,
    name: &str,
    mut out: impl Write,
    opts: &CsvOptions,
) -> Result<(u64, DataFeedDesc)> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(opts.delimiter)
        .from_reader(input);
    let header_err = |message: String| Error::Convert {
        file: name.to_string(),
        line: 1,
        message,
    };
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| header_err(e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let find = |column: &str| {
        header
            .iter()
            .position(|h| h == column)
            .ok_or_else(|| header_err(format!("no column \"{column}\" in the header")))
    };
    let label_index = find(&opts.label)?;
    let columns: Vec<usize> = match &opts.columns {
        Some(names) => names.iter().map(|c| find(c)).collect::<Result<_>>()?,
        None => (0..header.len()).filter(|&i| i != label_index).collect(),
    };
    if columns.is_empty() {
        return Err(header_err("no feature column".to_string()));
    }
    let mut slots = vec![Slot::sparse(&opts.label, SlotType::F32)];
    slots.extend(
        columns
            .iter()
            .map(|&c| Slot::sparse(&header[c], SlotType::U64)),
    );
    let desc = DataFeedDesc::multi_slot(DEFAULT_BATCH_SIZE, slots);
    desc.validate().map_err(header_err)?;
    let buckets = opts.buckets.max(1);
    let mut key = Vec::new();
    let mut lines = 0;
    for record in reader.records() {
        let record = record.map_err(|e| Error::Convert {
            file: name.to_string(),
            line: e.position().map_or(0, |p| p.line()),
            message: e.to_string(),
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let err = |message: String| Error::Convert {
            file: name.to_string(),
            line,
            message,
        };
        let label_text = record.get(label_index).unwrap_or("");
        let label = parse_f32(
            label_text.trim(),
            &format!("label column \"{}\"", opts.label),
        )
        .map_err(err)?;
        write_slot(&mut out, &[label], name)?;
        for &c in &columns {
            key.clear();
            key.extend_from_slice(header[c].as_bytes());
            key.push(b'=');
            key.extend_from_slice(record.get(c).unwrap_or("").as_bytes());
            write_slot(&mut out, &[fnv1a64(&key) % buckets], name)?;
        }
        end_line(&mut out, name)?;
        lines += 1;
    }
    Ok((lines, desc))
}
