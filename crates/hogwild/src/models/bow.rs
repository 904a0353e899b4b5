//! Bag-of-words text classifier (Paddle's IMDB `bow_net`, fastText's supervised model): an embedding
//! bag over the word ids of an instance, optionally its words' character n-grams (fastText's
//! subwords, bucket ids written among the word ids by `hogwild convert --minn --maxn`) and hashed
//! bigrams of consecutive word ids, pooled (mean or sum), then a fully connected layer (without a
//! bias by default, as fastText) and a loss: a softmax cross-entropy by default, or for many
//! labels a hierarchical softmax, negative sampling, or one sigmoid per label, which also allows
//! several labels per instance (`loss`, [`Loss`]).
//!
//! Updates are applied instance by instance (as fastText does): each instance's gradient is applied
//! to its embedding rows and to the output layer before the next instance is read. A batch is one
//! optimizer call: AdamAsync's beta powers advance once per batch and table, and the coefficients
//! are computed once per batch.
//!
//! The learning rate is held for the first `lr_hold` of each training run (a quarter, by default)
//! and then decays linearly to zero (`lr_schedule = "linear"`, the default), following the
//! instances taken by all workers together; the rate of a batch is the one at its first instance.
//! The decay is what makes the model the run ends with a good one: at a constant rate the last
//! updates, and with several threads their races, leave the final weights far from the average
//! the model held during its last epoch. fastText decays from the first instance (`lr_hold = 0`),
//! which leaves long texts trained for few epochs far from converged (BBC News at 5 epochs); a
//! longer hold trains them further but lets small sets trained for many epochs overfit. A quarter
//! keeps every set of the quality benchmark within a few tenths of fastText or above it
//! (docs/benchmarks.md). `"constant"` keeps the optimizer's rate throughout.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::labels::{LabelScratch, Labels};
use super::loss::{Backward, Head, HeadScratch, Loss};
use super::{ModelConfig, ModelKind, OptimizerDesc};
use crate::checkpoint::Section;
use crate::feed::{Batch, DataFeedDesc, SlotType};
use crate::model::{Model, RunPlan, StageTimes};
use crate::optim::{LinearDecay, Optimizer};
use crate::rng::{fasttext_bigram, mix64, unit_f32};
use crate::store::{in_row_ranges, Table};
use crate::tools::convert::{FastTextOptions, Vocabulary};
use crate::{Error, Result};

/// How the embedding rows of an instance are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    /// The mean of the rows (fastText).
    #[default]
    Mean,
    /// The sum of the rows (Paddle's `sequence_pool(pool_type="sum")`).
    Sum,
}

/// How the learning rate changes over a training run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedule {
    /// From the optimizer's rate to zero, linearly in the instances trained (fastText's).
    #[default]
    Linear,
    /// The optimizer's rate throughout.
    Constant,
}

/// The bag-of-words model's settings. [`BowConfig::default`] holds the defaults of a
/// configuration file's `[model]` keys (the values below), except `vocab` and `classes`, which
/// have none: they are 0 there, which [`Bow::new`] refuses, so a Rust user writes them and what
/// else differs:
///
/// ```
/// use hogwild::models::{BowConfig, Loss};
///
/// let cfg = BowConfig { vocab: 30_000, classes: 4, loss: Loss::Softmax, ..BowConfig::default() };
/// assert_eq!((cfg.dim, cfg.words_slot.as_str(), cfg.lr_hold), (10, "words", 0.25));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BowConfig {
    /// The uint64 slot holding word ids (default `"words"`).
    #[serde(default = "default_words")]
    pub words_slot: String,
    /// The uint64 slot holding the class (one value per instance; default `"label"`).
    #[serde(default = "default_label")]
    pub label_slot: String,
    /// Number of word ids: ids must be below it (no default; with data from
    /// [`FastTextOptions::convert`](crate::tools::convert::FastTextOptions::convert), its
    /// [`FastTextOptions::id_space`](crate::tools::convert::FastTextOptions::id_space)).
    pub vocab: usize,
    /// Number of classes: labels must be below it (no default).
    pub classes: usize,
    /// The output layer's loss: `"softmax"`, `"hs"` (hierarchical softmax over a Huffman tree
    /// of the labels' counts, which the model keeps), `"ns"` (negative sampling: a sigmoid for
    /// the gold label and for `negative` labels drawn by the square roots of those counts) or
    /// `"ova"` (one sigmoid per label: an instance may have several labels). Default: softmax.
    #[serde(default)]
    pub loss: Loss,
    /// With `loss = "ns"`: negative labels per instance (fastText's `-neg`); other losses
    /// ignore it. Default 5.
    #[serde(default = "default_negative")]
    pub negative: usize,
    /// Embedding width (default 10).
    #[serde(default = "default_dim")]
    pub dim: usize,
    /// Rows for hashed word bigrams (fastText's `bucket`); 0 (the default) disables bigrams.
    #[serde(default)]
    pub bigram_buckets: usize,
    /// Rows for hashed character n-grams (fastText's subwords with `-minn`/`-maxn`): ids of the
    /// words slot from `vocab` to `vocab + subword_buckets - 1` are the buckets of a word's
    /// n-grams, as fastText numbers them (`nwords + hash % bucket`), and `hogwild convert
    /// --subword-buckets` writes them after each word. They are pooled with everything else and
    /// take no part in bigrams. 0 (the default): none, every id is a word below `vocab`.
    #[serde(default)]
    pub subword_buckets: usize,
    /// How an instance's rows are combined (default [`Pool::Mean`]).
    #[serde(default)]
    pub pool: Pool,
    /// Every instance also holds one learned end-of-text row (and, with bigrams, the bigram of
    /// its last word and the end), as fastText reads `</s>` at the end of every line. Pooled by
    /// the mean, it gives each instance a term that grows as the text gets shorter, which short
    /// texts need; an instance without words still has it. On by default.
    #[serde(default = "default_true")]
    pub end_of_text: bool,
    /// A learned bias per class in the output layer. Off by default, as in fastText: at small
    /// learning rates the biases fit the class frequencies long before the weights learn
    /// anything, and the model stays near predicting the most frequent class (5 epochs at lr 0.1
    /// lose up to 10 points of accuracy with them).
    #[serde(default)]
    pub bias: bool,
    /// How the learning rate changes over a training run (default [`LrSchedule::Linear`]).
    #[serde(default)]
    pub lr_schedule: LrSchedule,
    /// With the linear schedule: the share of the run, in `[0, 1)`, trained at the optimizer's
    /// rate before the decay to zero starts (0: fastText's schedule; default 0.25).
    #[serde(default = "default_lr_hold")]
    pub lr_hold: f64,
    /// Seed of the initial embedding (default 0).
    #[serde(default)]
    pub seed: u64,
}

impl Default for BowConfig {
    fn default() -> Self {
        Self {
            words_slot: default_words(),
            label_slot: default_label(),
            vocab: 0,
            classes: 0,
            loss: Loss::default(),
            negative: default_negative(),
            dim: default_dim(),
            bigram_buckets: 0,
            subword_buckets: 0,
            pool: Pool::default(),
            end_of_text: true,
            bias: false,
            lr_schedule: LrSchedule::default(),
            lr_hold: default_lr_hold(),
            seed: 0,
        }
    }
}

fn default_words() -> String {
    "words".into()
}
fn default_label() -> String {
    "label".into()
}
fn default_dim() -> usize {
    10
}
fn default_negative() -> usize {
    5
}
fn default_true() -> bool {
    true
}
fn default_lr_hold() -> f64 {
    0.25
}

impl BowConfig {
    /// Checks the settings (see [`ModelConfig::validate`](super::ModelConfig::validate)).
    pub(crate) fn check(&self) -> Result<()> {
        let bad = |field: &str, reason: &str| {
            Err(Error::InvalidConfig {
                field: field.into(),
                reason: reason.into(),
            })
        };
        if self.vocab == 0 {
            return bad("vocab", "must be at least 1");
        }
        if self.classes < 2 {
            return bad("classes", "must be at least 2");
        }
        if self.dim == 0 {
            return bad("dim", "must be at least 1");
        }
        if self.negative == 0 {
            return bad("negative", "must be at least 1");
        }
        if self.words_slot == self.label_slot {
            return bad("label_slot", "must differ from words_slot");
        }
        if !(0.0..1.0).contains(&self.lr_hold) {
            return bad(
                "lr_hold",
                "must be at least 0 and below 1 (a share of the run)",
            );
        }
        Ok(())
    }

    /// The positions of the words and (when the desc has it) label slots among `desc`'s used
    /// slots.
    fn slots(&self, desc: &DataFeedDesc) -> Result<(usize, Option<usize>)> {
        let words_at = slot_position(desc, &self.words_slot, "words")?.ok_or_else(|| {
            Error::InvalidConfig {
                field: "words_slot".into(),
                reason: format!("the DataFeedDesc has no used slot \"{}\"", self.words_slot),
            }
        })?;
        Ok((words_at, slot_position(desc, &self.label_slot, "label")?))
    }

    /// The label's position, which training needs (evaluation and prediction do without).
    fn training_label(&self, label_at: Option<usize>) -> Result<usize> {
        label_at.ok_or_else(|| Error::InvalidConfig {
            field: "label_slot".into(),
            reason: format!(
                "training needs the used slot \"{}\" in the DataFeedDesc",
                self.label_slot
            ),
        })
    }

    /// Whether the model can read batches laid out by `desc` (see
    /// [`ModelConfig::check_desc`](super::ModelConfig::check_desc)).
    pub(crate) fn check_desc(&self, desc: &DataFeedDesc, training: bool) -> Result<()> {
        let (_, label_at) = self.slots(desc)?;
        if training {
            self.training_label(label_at)?;
        }
        Ok(())
    }
}

/// Bigram rows at least this wide (weights and optimizer slots) get base pages, not huge pages
/// (`Table::prefer_base_pages`). Measured on the quality benchmark's sets, 5 epochs, 1 thread:
/// at dim 100 a 600-document set trained in 0.4-3.2 s with huge pages (the first epoch zeroing up
/// to 800 MB of them) and 0.5-0.55 s without, while BBC (1 M tokens) took the same time either
/// way; at dim 10 (40-byte rows) huge pages made BBC about 1.3x faster, so narrow rows keep them.
const WIDE_ROW_BYTES: usize = 256;

/// How many rows ahead of the one it adds the forward pass prefetches: an instance's rows are
/// random rows of a table far larger than the caches, and adding them one after another waits on
/// memory for each (fortunes, dim 100, 5 epochs, 1 thread: 1.50 s without, 1.22 s with; 4 and 16
/// rows ahead measured the same as 8).
const PREFETCH_ROWS: usize = 8;

/// The bag-of-words model: the embedding table (`vocab` word rows, `bigram_buckets` bigram rows,
/// the end-of-text row when `end_of_text` is set, then `subword_buckets` n-gram rows; `dim` wide)
/// and the
/// output table (`classes` rows of `dim + 1`: weights then bias), shared by every worker; and its
/// labels' names, prediction format and evaluation counts ([`Labels`]).
#[derive(Debug)]
pub struct Bow<O> {
    cfg: BowConfig,
    opt: O,
    emb: Table,
    fc: Table,
    /// The training run's progress, in instances.
    decay: LinearDecay,
    labels: Labels,
    /// The output layer's structure (the tree of `hs`, the negatives of `ns`).
    head: Head,
    /// Per class: its instances in the training data, when the loss depends on them (`hs`,
    /// `ns`).
    label_counts: Option<Vec<u64>>,
}

/// One worker's scratch buffers: allocated once, reused for every instance.
#[derive(Debug)]
pub struct BowWorker {
    pub(crate) rows: Vec<usize>,
    /// The instance's word ids without its n-gram ids: what bigrams pair (with subwords only).
    pub(crate) words: Vec<u64>,
    pub(crate) hidden: Vec<f32>,
    pub(crate) grad_hidden: Vec<f32>,
    pub(crate) head: HeadScratch,
    /// The instance's labels.
    pub(crate) golds: Vec<usize>,
    pub(crate) labels: LabelScratch,
    /// Training with `ns`: instances until the next one whose labels are all ranked, and the
    /// accuracy of the latest batch that ranked some.
    pub(crate) rank_in: usize,
    pub(crate) accuracy: f64,
    /// Positions of the words and label slots in a batch.
    pub(crate) words_at: usize,
    pub(crate) label_at: Option<usize>,
}

/// What went wrong with an instance, before it is placed in a batch.
#[derive(Debug, PartialEq)]
pub(crate) enum InstanceError {
    WordOutOfRange { id: u64, offset: usize },
    LabelOutOfRange { label: u64 },
}

impl<O: Optimizer<f32>> Bow<O> {
    /// A model with fresh tables (zero weights; call [`Bow::init`], the startup step, before training).
    pub fn new(cfg: BowConfig, opt: O) -> Result<Self> {
        cfg.check()?;
        let mut emb = Table::new("embedding", Self::embedding_rows(&cfg), cfg.dim, &opt)?;
        if emb.stride() * 4 >= WIDE_ROW_BYTES {
            emb.prefer_base_pages(cfg.vocab..cfg.vocab + cfg.bigram_buckets);
            let subwords = Self::subword_row(&cfg, 0);
            emb.prefer_base_pages(subwords..subwords + cfg.subword_buckets);
        }
        let fc = Table::new(
            "output",
            cfg.loss.output_rows(cfg.classes),
            cfg.dim + 1,
            &opt,
        )?;
        Ok(Self::assemble(cfg, opt, emb, fc))
    }

    /// A model from a checkpoint's tables (which must fit `cfg` and `opt`), label names (a
    /// checkpoint without them gives a model without them) and, for `hs` and `ns`, label
    /// counts.
    pub fn from_checkpoint(
        cfg: BowConfig,
        opt: O,
        ck: &mut crate::checkpoint::Checkpoint,
    ) -> Result<Self> {
        cfg.check()?;
        let emb = ck.take_table("embedding", Self::embedding_rows(&cfg), cfg.dim)?;
        let fc = ck.take_table("output", cfg.loss.output_rows(cfg.classes), cfg.dim + 1)?;
        emb.check_optimizer::<O>()?;
        fc.check_optimizer::<O>()?;
        let labels = Labels::from_checkpoint(ck, cfg.classes)?;
        let counts = match ck.take_section(LABEL_COUNTS_SECTION) {
            Some(bytes) => {
                Some(
                    parse_counts(&bytes, cfg.classes).map_err(|reason| Error::Checkpoint {
                        path: ck.path.display().to_string(),
                        reason: format!("section {LABEL_COUNTS_SECTION}: {reason}"),
                    })?,
                )
            }
            None if cfg.loss.needs_counts() => {
                return Err(Error::Checkpoint {
                    path: ck.path.display().to_string(),
                    reason: format!(
                        "loss = \"{}\" needs the label counts (section {LABEL_COUNTS_SECTION}), \
                         which it lacks",
                        cfg.loss.name()
                    ),
                })
            }
            None => None,
        };
        let mut m = Self {
            labels,
            ..Self::assemble(cfg, opt, emb, fc)
        };
        if let Some(counts) = counts {
            m.set_counts(counts);
        }
        Ok(m)
    }

    fn assemble(cfg: BowConfig, opt: O, emb: Table, fc: Table) -> Self {
        // Until the data's counts are set, every label counts the same: a balanced tree, or
        // negatives drawn uniformly.
        let counts = cfg.loss.needs_counts().then(|| vec![1; cfg.classes]);
        let head = Head::new(cfg.loss, counts.as_deref().unwrap_or(&[]), cfg.negative);
        Self {
            labels: Labels::new(cfg.classes),
            cfg,
            opt,
            emb,
            fc,
            decay: LinearDecay::default(),
            head,
            label_counts: counts,
        }
    }

    /// Sets each class's number of instances in the training data, of which `loss = "hs"`
    /// builds its tree (a new model's is balanced, as if all were equal) and `loss = "ns"` draws
    /// its negative labels (uniformly until set), on a model not trained yet: the tree decides
    /// what the output rows mean. The counts are kept in the model's checkpoint. Other losses do
    /// not use them.
    pub fn set_label_counts(&mut self, counts: Vec<u64>) -> Result<()> {
        if counts.len() != self.cfg.classes {
            return Err(Error::InvalidConfig {
                field: "label counts".into(),
                reason: format!(
                    "{} counts for a model of {} classes",
                    counts.len(),
                    self.cfg.classes
                ),
            });
        }
        if self.cfg.loss.needs_counts() {
            self.set_counts(counts);
        }
        Ok(())
    }

    fn set_counts(&mut self, counts: Vec<u64>) {
        self.head = Head::new(self.cfg.loss, &counts, self.cfg.negative);
        self.label_counts = Some(counts);
    }

    /// The label counts the model keeps (`hs`, `ns`), in class order.
    pub fn label_counts(&self) -> Option<&[u64]> {
        self.label_counts.as_deref()
    }

    fn embedding_rows(cfg: &BowConfig) -> usize {
        Self::subword_row(cfg, 0) + cfg.subword_buckets
    }

    /// The row of n-gram bucket `bucket`: after the rows a model without subwords has, so that
    /// those keep their places.
    fn subword_row(cfg: &BowConfig, bucket: usize) -> usize {
        cfg.vocab + cfg.bigram_buckets + usize::from(cfg.end_of_text) + bucket
    }

    /// The settings.
    pub fn config(&self) -> &BowConfig {
        &self.cfg
    }
    /// The optimizer.
    pub fn optimizer(&self) -> &O {
        &self.opt
    }
    /// The embedding table (words, bigram buckets, the end-of-text row, n-gram buckets).
    pub fn embedding(&self) -> &Table {
        &self.emb
    }
    /// The output table (one row per class, or per inner node of the tree with `hs`: weights,
    /// then the bias).
    pub fn output(&self) -> &Table {
        &self.fc
    }
    /// The labels: their names, the prediction format, evaluation counts.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }
    /// The labels, to name them or set how predictions are written and counted.
    pub fn labels_mut(&mut self) -> &mut Labels {
        &mut self.labels
    }

    /// The startup step on a fresh model: word rows and the end-of-text row uniform in
    /// `[-1/dim, 1/dim]` (fastText's), deterministic in the seed and the row (so the rows are
    /// filled in parallel, one range per core, with the same result); bigram and n-gram rows and
    /// the output layer zero. A fresh table is zero pages that nothing has touched: leaving the
    /// bucket rows as they are costs nothing for millions of buckets (at dim 100, 2M buckets are 800 MB that
    /// a random fill took seconds to write), and a bucket's page is touched first by the worker
    /// that trains it. fastText's initialisation leaves most bucket rows zero too (it fills a
    /// tenth of the matrix per thread).
    pub fn init(&self) {
        in_row_ranges(self.cfg.vocab, |range| self.init_rows(range));
        if self.cfg.end_of_text {
            let end = self.cfg.vocab + self.cfg.bigram_buckets;
            self.init_rows(end..end + 1);
        }
        let zero = vec![0.0f32; self.cfg.dim + 1];
        for c in 0..self.fc.rows() {
            self.fc.write_weights(c, &zero);
        }
    }

    fn init_rows(&self, range: std::ops::Range<usize>) {
        let dim = self.cfg.dim;
        let scale = 1.0 / dim as f32;
        let mut row = vec![0.0f32; dim];
        for r in range {
            let mut s = mix64(self.cfg.seed ^ (r as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
            for x in row.iter_mut() {
                s = mix64(s);
                *x = (unit_f32(s) * 2.0 - 1.0) * scale;
            }
            self.emb.write_weights(r, &row);
        }
    }

    /// Scratch buffers for one worker (the first of a run's: see [`Bow::numbered_worker`]).
    pub fn new_worker(&self) -> BowWorker {
        self.numbered_worker(0)
    }

    /// Scratch buffers for worker `n` of a run: its negative labels (`ns`) are a stream of its
    /// own, a function of the model's seed and `n`, so a run is repeatable at a thread count.
    pub fn numbered_worker(&self, n: usize) -> BowWorker {
        let seed = (self.cfg.seed ^ NEGATIVES_STREAM).wrapping_add(n as u64);
        BowWorker {
            rows: Vec::with_capacity(1024),
            words: Vec::new(),
            hidden: vec![0.0; self.cfg.dim + 1],
            grad_hidden: vec![0.0; self.cfg.dim],
            head: HeadScratch::new(self.cfg.classes, seed),
            golds: Vec::with_capacity(4),
            labels: LabelScratch::default(),
            rank_in: 0,
            accuracy: 0.0,
            words_at: 0,
            label_at: None,
        }
    }

    /// Fills `w.rows` with the embedding rows of `ids`: the words and n-grams, one bucket per
    /// bigram of consecutive words (the last word and the end of text making one more with
    /// `end_of_text`), then the end-of-text row.
    #[inline]
    pub(crate) fn gather_rows(
        &self,
        w: &mut BowWorker,
        ids: &[u64],
    ) -> std::result::Result<(), InstanceError> {
        let vocab = self.cfg.vocab as u64;
        let subwords = self.cfg.subword_buckets as u64;
        w.rows.clear();
        w.words.clear();
        for (offset, &id) in ids.iter().enumerate() {
            if id < vocab {
                w.rows.push(id as usize);
                if subwords > 0 {
                    w.words.push(id);
                }
            } else if id - vocab < subwords {
                w.rows
                    .push(Self::subword_row(&self.cfg, (id - vocab) as usize));
            } else {
                return Err(InstanceError::WordOutOfRange { id, offset });
            }
        }
        // Without subwords every id is a word, and the ids are the words.
        let words = if subwords > 0 { &w.words[..] } else { ids };
        let buckets = self.cfg.bigram_buckets as u64;
        let bucket = |a: u64, b: u64| (vocab + fasttext_bigram(a, b) % buckets) as usize;
        if buckets > 0 {
            for pair in words.windows(2) {
                w.rows.push(bucket(pair[0], pair[1]));
            }
        }
        if self.cfg.end_of_text {
            // The end of text reads as word id `vocab`, one past the words.
            if let (true, Some(&last)) = (buckets > 0, words.last()) {
                w.rows.push(bucket(last, vocab));
            }
            w.rows.push(self.cfg.vocab + self.cfg.bigram_buckets);
        }
        Ok(())
    }

    /// Before a training step reads its rows: has the table write the pages of those it keeps on
    /// base pages, the wide bigram rows (`new`), before anything reads them
    /// ([`Table::touch_to_write`]). At dim 100 with 2 M buckets, reading first cost most of a
    /// small set's run at 2 threads (tweets, 5 epochs: 0.85 s, then 0.26 s).
    #[inline]
    pub(crate) fn claim_rows(&self, w: &BowWorker) {
        for &r in &w.rows {
            self.emb.touch_to_write(r);
        }
    }

    /// Forward pass over `w.rows`: pooled hidden vector (with a trailing 1 for the bias, 0 without
    /// one, so that the bias column stays at zero); the output layer follows in
    /// [`Bow::score`].
    #[inline]
    pub(crate) fn forward(&self, w: &mut BowWorker) {
        let dim = self.cfg.dim;
        let h = &mut w.hidden[..dim];
        h.fill(0.0);
        for &r in w.rows.iter().take(PREFETCH_ROWS) {
            self.emb.prefetch_weights(r);
        }
        for (k, &r) in w.rows.iter().enumerate() {
            if let Some(&ahead) = w.rows.get(k + PREFETCH_ROWS) {
                self.emb.prefetch_weights(ahead);
            }
            self.emb.add_weights_to(r, 1.0, h);
        }
        if self.cfg.pool == Pool::Mean && !w.rows.is_empty() {
            let inv = 1.0 / w.rows.len() as f32;
            h.iter_mut().for_each(|x| *x *= inv);
        }
        w.hidden[dim] = if self.cfg.bias { 1.0 } else { 0.0 };
    }

    /// The output layer after `forward`: the loss of the instance's labels `w.golds` and whether
    /// its most probable class is one of them (`ns` tells only with `rank`: it then scores every
    /// class, [`Head::loss`]). With `steps` (training) it is also the backward pass: it updates
    /// the output rows and leaves the gradient reaching the pooled vector in `w.grad_hidden`.
    #[inline]
    pub(crate) fn score(
        &self,
        w: &mut BowWorker,
        steps: Option<&BowSteps<O>>,
        rank: bool,
    ) -> (f32, Option<bool>) {
        let backward = steps.map(|steps| {
            w.grad_hidden.fill(0.0);
            Backward {
                grad_hidden: &mut w.grad_hidden[..],
                opt: &self.opt,
                step: &steps.fc,
            }
        });
        self.head
            .loss(&self.fc, &w.hidden, &w.golds, &mut w.head, backward, rank)
    }

    /// Applies the instance's gradient to its embedding rows (after `score` with `steps`, which
    /// updated the output rows).
    #[inline]
    pub(crate) fn update(&self, w: &BowWorker, steps: &BowSteps<O>) {
        let scale = match self.cfg.pool {
            Pool::Mean if !w.rows.is_empty() => 1.0 / w.rows.len() as f32,
            _ => 1.0,
        };
        for &r in &w.rows {
            self.emb
                .update_row(&self.opt, &steps.emb, r, &w.grad_hidden, scale);
        }
    }

    /// Starts an optimizer call (one per batch) on both tables, at `lr_scale` times the
    /// optimizer's learning rate.
    pub(crate) fn begin(&self, lr_scale: f32) -> Result<BowSteps<O>> {
        let opt = self.opt.with_lr(self.opt.lr() * lr_scale);
        Ok(BowSteps {
            emb: self.emb.begin(&opt, true)?,
            fc: self.fc.begin(&opt, false)?,
        })
    }

    /// The factor on the optimizer's learning rate for the next batch: 1 at the start of a run,
    /// 0 once the run's instances are all taken (always 1 with `lr_schedule = "constant"`).
    pub fn lr_scale(&self) -> f32 {
        self.scale_at(self.decay.done())
    }

    /// The factor on the learning rate for instances starting at `done` of the run.
    fn scale_at(&self, done: u64) -> f32 {
        match self.cfg.lr_schedule {
            LrSchedule::Linear => self.decay.scale_after(done, self.cfg.lr_hold),
            LrSchedule::Constant => 1.0,
        }
    }

    /// Takes a batch of `instances` from the run's progress; returns the factor on the learning
    /// rate for it.
    fn take_batch(&self, instances: usize) -> f32 {
        self.scale_at(self.decay.advance(instances as u64))
    }

    /// Ends an optimizer call that updated `rows` embedding rows and `outputs` output rows.
    pub(crate) fn finish(&self, rows: usize, outputs: usize) {
        self.emb.finish(&self.opt, true, rows);
        self.fc.finish(&self.opt, false, outputs);
    }

    /// Trains on one instance of label `label`; returns its loss and whether it was classified
    /// right before the update.
    pub fn train_instance(
        &self,
        w: &mut BowWorker,
        steps: &BowSteps<O>,
        ids: &[u64],
        label: u64,
    ) -> Result<(f32, bool)> {
        self.train_labels(w, steps, ids, &[label])
    }

    /// Trains on one instance of labels `labels` (one, except with `loss = "ova"`); returns its
    /// loss and whether its most probable class was one of them before the update.
    pub fn train_labels(
        &self,
        w: &mut BowWorker,
        steps: &BowSteps<O>,
        ids: &[u64],
        labels: &[u64],
    ) -> Result<(f32, bool)> {
        self.set_golds(w, labels, 0)?;
        self.gather_rows(w, ids)
            .map_err(|e| self.instance_error(e, 0))?;
        self.claim_rows(w);
        self.forward(w);
        let (loss, right) = self.score(w, Some(steps), true);
        self.update(w, steps);
        Ok((loss, right == Some(true)))
    }

    /// Class probabilities of one instance (in `w`'s buffer).
    pub fn predict_instance<'w>(&self, w: &'w mut BowWorker, ids: &[u64]) -> Result<&'w [f32]> {
        self.gather_rows(w, ids)
            .map_err(|e| self.instance_error(e, 0))?;
        self.forward(w);
        self.head.predict(&self.fc, &w.hidden, &mut w.head);
        Ok(&w.head.probs)
    }

    /// The `k` most probable labels of text `text` (fastText-style: words separated by
    /// whitespace, `__label__` tokens skipped), most probable first, each with its name and
    /// probability (for `ova`, each label's own sigmoid). The text becomes word ids as
    /// [`FastTextOptions::convert`](crate::tools::convert::FastTextOptions::convert) converts it with `vocab`,
    /// its words by the vocabulary and its character n-grams by the vocabulary's
    /// [`subwords`](Vocabulary::subwords): the training data's conversion, unless that hashed
    /// its words or added bigram ids (`hogwild convert --buckets`, `--bigram-buckets`), whose
    /// ids [`FastTextOptions::text_ids`](crate::tools::convert::FastTextOptions::text_ids)
    /// gives for [`Bow::predict_ids`]. Labels are named by the vocabulary (else by the model's
    /// [`Labels`], else by number).
    ///
    /// ```
    /// use hogwild::models::{Bow, BowConfig};
    /// use hogwild::optim::Sgd;
    /// use hogwild::tools::convert::Vocabulary;
    ///
    /// let mut vocab = Vocabulary::default();
    /// vocab.scan("__label__pos good\n__label__neg bad\n".as_bytes(), "train.txt", true)?;
    /// let cfg = BowConfig { vocab: vocab.word_ids() as usize, classes: 2, ..BowConfig::default() };
    /// let model = Bow::new(cfg, Sgd { lr: 0.1f32 })?;
    /// hogwild::executor::startup(&model);
    /// let top = model.predict_text(&vocab, "good and unseen words", 2)?;
    /// assert_eq!(top.len(), 2);
    /// assert!(top[0].0 == "__label__pos" || top[0].0 == "__label__neg");
    /// assert!(top[0].1 >= top[1].1);
    /// # Ok::<(), hogwild::Error>(())
    /// ```
    pub fn predict_text(
        &self,
        vocab: &Vocabulary,
        text: &str,
        k: usize,
    ) -> Result<Vec<(String, f32)>> {
        let opts = FastTextOptions {
            subwords: vocab.subwords(),
            ..FastTextOptions::default()
        };
        let top = self.predict_ids(&opts.text_ids(vocab, text), k)?;
        let names = vocab.label_names();
        Ok(top
            .into_iter()
            .map(|(id, p)| match names.get(id) {
                Some(name) => (name.clone(), p),
                None => (self.labels.name(id), p),
            })
            .collect())
    }

    /// The `k` most probable classes of an instance of word ids `ids` (as the data's words slot
    /// holds them), most probable first, each with its probability. Each call makes a worker's
    /// buffers; a caller asking about many instances keeps one ([`Bow::new_worker`]) and calls
    /// [`Bow::predict_instance`].
    pub fn predict_ids(&self, ids: &[u64], k: usize) -> Result<Vec<(usize, f32)>> {
        let mut worker = self.new_worker();
        let probs = self.predict_instance(&mut worker, ids)?;
        let mut top: Vec<(usize, f32)> = probs.iter().copied().enumerate().collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        top.truncate(k);
        Ok(top)
    }

    /// Sets `w.golds` to instance `instance`'s labels `labels`: in range, and one of them unless
    /// the loss takes several.
    fn set_golds(&self, w: &mut BowWorker, labels: &[u64], instance: usize) -> Result<()> {
        let several = self.cfg.loss.multi_label();
        if labels.is_empty() || (labels.len() > 1 && !several) {
            let want = if several {
                "one label or more".to_string()
            } else {
                format!(
                    "one label (loss = \"{}\"; several labels need loss = \"ova\")",
                    self.cfg.loss.name()
                )
            };
            return Err(Error::BadInstance {
                slot: self.cfg.label_slot.clone(),
                instance,
                reason: format!("expected {want}, got {} values", labels.len()),
            });
        }
        w.golds.clear();
        for &label in labels {
            if label >= self.cfg.classes as u64 {
                return Err(self.instance_error(InstanceError::LabelOutOfRange { label }, instance));
            }
            // A label written twice on a line is one of its labels, as once.
            if !w.golds.contains(&(label as usize)) {
                w.golds.push(label as usize);
            }
        }
        Ok(())
    }

    pub(crate) fn instance_error(&self, e: InstanceError, instance: usize) -> Error {
        match e {
            InstanceError::WordOutOfRange { id, offset } => Error::BadInstance {
                slot: self.cfg.words_slot.clone(),
                instance,
                reason: match self.cfg.subword_buckets {
                    0 => format!(
                        "word id {id} at offset {offset} is out of range (vocab = {})",
                        self.cfg.vocab
                    ),
                    n => format!(
                        "word id {id} at offset {offset} is out of range (vocab = {} words, \
                         then subword_buckets = {n} n-gram buckets)",
                        self.cfg.vocab
                    ),
                },
            },
            InstanceError::LabelOutOfRange { label } => Error::BadInstance {
                slot: self.cfg.label_slot.clone(),
                instance,
                reason: format!(
                    "label {label} is out of range (classes = {})",
                    self.cfg.classes
                ),
            },
        }
    }
}

const METRICS: &[&str] = &["loss", "accuracy"];

/// Training with `ns` ranks every label, for the accuracy it reports, on so few instances that
/// ranking reads about this many output rows per instance trained: each worker ranks one
/// instance in `classes / RANK_ROWS` (every instance below `2 * RANK_ROWS` classes). An instance
/// trains `1 + negative` output rows and its embedding rows (some 40 for 20 words and their
/// bigrams), while ranking reads all `classes`: at 10,000 labels, ranking even one instance per
/// batch of 64 cost more than the training, and the rate must follow the number of labels.
const RANK_ROWS: usize = 16;

/// Mixed into the model's seed for the workers' streams of negative labels, so that they
/// differ from the initialisation's (which hashes the seed with the row).
const NEGATIVES_STREAM: u64 = 0x6E65_6761_7469_7665;

fn slot_position(desc: &DataFeedDesc, name: &str, role: &str) -> Result<Option<usize>> {
    let used = desc.used_slots();
    let Some(at) = used.iter().position(|s| s.name == name) else {
        return Ok(None);
    };
    if used[at].slot_type() != SlotType::U64 {
        return Err(Error::InvalidConfig {
            field: format!("{role} slot \"{name}\""),
            reason: "must be a uint64 slot in the DataFeedDesc".into(),
        });
    }
    Ok(Some(at))
}

impl<O: Optimizer<f32> + OptimizerDesc> Model for Bow<O> {
    type Worker = BowWorker;

    fn metrics(&self) -> Vec<String> {
        METRICS.iter().map(|s| s.to_string()).collect()
    }

    fn startup(&self) {
        self.init();
    }

    /// Starts the learning-rate decay over the run's instances (counted first when streaming).
    fn plan(&self, plan: &RunPlan<'_>) -> Result<()> {
        if self.cfg.lr_schedule == LrSchedule::Linear {
            let per_epoch = plan.instances_per_epoch()?;
            self.decay
                .start(per_epoch.saturating_mul(plan.total as u64));
            self.decay
                .set_done(per_epoch.saturating_mul(plan.before as u64));
        }
        Ok(())
    }

    fn worker(&self, desc: &DataFeedDesc) -> Result<BowWorker> {
        self.worker_for(desc, 0)
    }

    /// Numbered workers: each draws its own negative labels (`ns`).
    fn workers(&self, desc: &DataFeedDesc, threads: usize) -> Result<Vec<BowWorker>> {
        (0..threads).map(|n| self.worker_for(desc, n)).collect()
    }

    fn train_batch(
        &self,
        w: &mut BowWorker,
        batch: &Batch,
        out: &mut [f64],
        mut stages: Option<&mut StageTimes>,
    ) -> Result<()> {
        let label_at = self.cfg.training_label(w.label_at)?;
        let steps = self.begin(self.take_batch(batch.len))?;
        let (mut loss, mut rows, mut outputs) = (0.0f64, 0usize, 0usize);
        let (mut right, mut ranked) = (0usize, 0usize);
        let every = self.rank_every();
        for i in 0..batch.len {
            self.labels_of(w, batch, label_at, i)?;
            let ids = batch.slots[w.words_at].u64s(i).unwrap_or(&[]);
            let t0 = stages.as_ref().map(|_| Instant::now());
            self.gather_rows(w, ids)
                .map_err(|e| self.instance_error(e, i))?;
            self.claim_rows(w);
            self.forward(w);
            let t1 = t0.map(|_| Instant::now());
            // The output layer's forward and backward pass and its update are one: all in
            // `backward`; `update` is the embedding rows'.
            let rank = w.rank_in == 0;
            w.rank_in = if rank { every - 1 } else { w.rank_in - 1 };
            let (l, ok) = self.score(w, Some(&steps), rank);
            let t2 = t0.map(|_| Instant::now());
            self.update(w, &steps);
            if let (Some(st), Some(t0), Some(t1), Some(t2)) = (stages.as_deref_mut(), t0, t1, t2) {
                let t3 = Instant::now();
                st.forward += t1 - t0;
                st.backward += t2 - t1;
                st.update += t3 - t2;
            }
            loss += l as f64;
            if let Some(ok) = ok {
                right += usize::from(ok);
                ranked += 1;
            }
            rows += w.rows.len();
            outputs += w.head.grads.len();
        }
        self.finish(rows, outputs);
        out[0] = loss / batch.len.max(1) as f64;
        // A batch of no ranked instance reports the worker's latest (`ns`, many labels): each
        // ranked instance stands for those trained after it until the next one.
        if ranked > 0 {
            w.accuracy = right as f64 / ranked as f64;
        }
        out[1] = w.accuracy;
        Ok(())
    }

    fn eval_batch(
        &self,
        w: &mut BowWorker,
        batch: &Batch,
        out: &mut [f64],
        mut predictions: Option<&mut String>,
    ) -> Result<()> {
        let (mut loss, mut right) = (0.0f64, 0usize);
        for i in 0..batch.len {
            let ids = batch.slots[w.words_at].u64s(i).unwrap_or(&[]);
            self.gather_rows(w, ids)
                .map_err(|e| self.instance_error(e, i))?;
            self.forward(w);
            if let Some(label_at) = w.label_at {
                self.labels_of(w, batch, label_at, i)?;
                let (l, ok) = self.score(w, None, true);
                loss += l as f64;
                right += usize::from(ok == Some(true));
            } else if self.cfg.loss != Loss::Hs {
                // The probabilities to write (hs searches its tree for those it writes).
                self.head.predict(&self.fc, &w.hidden, &mut w.head);
            }
            let BowWorker {
                hidden,
                head,
                golds,
                labels,
                label_at,
                ..
            } = w;
            let scores = self.head.scores(&self.fc, hidden, &head.probs);
            if label_at.is_some() {
                self.labels.count(labels, golds, &scores);
            }
            if let Some(text) = predictions.as_deref_mut() {
                self.labels.write(labels, text, &scores);
            }
        }
        let n = batch.len.max(1) as f64;
        let (l, a) = match w.label_at {
            Some(_) => (loss / n, right as f64 / n),
            None => (f64::NAN, f64::NAN),
        };
        out[0] = l;
        out[1] = a;
        Ok(())
    }

    fn check_instance(&self, w: &mut BowWorker, batch: &Batch, i: usize) -> Result<()> {
        if let Some(label_at) = w.label_at {
            self.labels_of(w, batch, label_at, i)?;
        }
        let ids = batch.slots[w.words_at].u64s(i).unwrap_or(&[]);
        self.gather_rows(w, ids)
            .map_err(|e| self.instance_error(e, i))
    }

    fn check_metrics_desc(&self, desc: &DataFeedDesc) -> Result<()> {
        match slot_position(desc, &self.cfg.label_slot, "label")? {
            Some(_) => Ok(()),
            None => Err(super::missing_label(&self.cfg.label_slot)),
        }
    }

    /// An evaluation's top-k counts of the worker go to the model's ([`Labels::take_counts`]).
    fn flush(&self, w: &mut BowWorker) {
        self.labels.flush(&mut w.labels);
    }

    fn tables(&self) -> Vec<&Table> {
        vec![&self.emb, &self.fc]
    }

    /// The label names, when the model has them, and the label counts of `hs` and `ns`.
    fn sections(&self) -> Vec<Section> {
        let mut sections = self.labels.sections();
        if let Some(counts) = &self.label_counts {
            let mut text = String::new();
            for c in counts {
                text.push_str(&c.to_string());
                text.push('\n');
            }
            sections.push(Section {
                name: LABEL_COUNTS_SECTION.into(),
                bytes: text.into_bytes(),
            });
        }
        sections
    }

    fn describe(&self) -> String {
        ModelConfig {
            model: ModelKind::Bow(self.cfg.clone()),
            optimizer: self.opt.describe(),
        }
        .to_toml()
    }
}

impl<O: Optimizer<f32>> Bow<O> {
    /// One training instance in this many has every label ranked (all of them except with `ns`
    /// over more than [`RANK_ROWS`] labels).
    fn rank_every(&self) -> usize {
        match self.cfg.loss {
            Loss::Ns => (self.cfg.classes / RANK_ROWS).max(1),
            _ => 1,
        }
    }

    /// Worker `n` for batches laid out by `desc`.
    fn worker_for(&self, desc: &DataFeedDesc, n: usize) -> Result<BowWorker> {
        let (words_at, label_at) = self.cfg.slots(desc)?;
        let mut w = self.numbered_worker(n);
        w.words_at = words_at;
        w.label_at = label_at;
        Ok(w)
    }

    /// Sets `w.golds` to the labels of instance `i` of `batch`.
    fn labels_of(&self, w: &mut BowWorker, batch: &Batch, label_at: usize, i: usize) -> Result<()> {
        let values = batch.slots[label_at].u64s(i).unwrap_or(&[]);
        self.set_golds(w, values, i)
    }
}

/// The checkpoint section holding the label counts of `hs` and `ns`: one decimal count per line,
/// in class order.
const LABEL_COUNTS_SECTION: &str = "label_counts";

/// The counts of a [`LABEL_COUNTS_SECTION`] for `classes` classes.
fn parse_counts(bytes: &[u8], classes: usize) -> std::result::Result<Vec<u64>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let counts = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            line.parse::<u64>()
                .map_err(|e| format!("line {}: \"{line}\" is no count: {e}", i + 1))
        })
        .collect::<std::result::Result<Vec<u64>, String>>()?;
    if counts.len() != classes {
        return Err(format!(
            "{} counts for a model of {classes} classes",
            counts.len()
        ));
    }
    Ok(counts)
}

/// The per-batch optimizer steps of the two tables.
pub struct BowSteps<O: Optimizer<f32>> {
    emb: O::Step,
    fc: O::Step,
}

/// The index of the largest value (the first on ties).
pub(crate) fn argmax(xs: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate() {
        if x > xs[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::labels::Scores;
    use crate::models::TopK;
    use crate::optim::{Adagrad, AdamAsync, Sgd};
    use crate::rng::FASTTEXT_NGRAM_MULT;
    use approx::assert_relative_eq;

    fn cfg(bigrams: usize) -> BowConfig {
        BowConfig {
            words_slot: "words".into(),
            label_slot: "label".into(),
            vocab: 20,
            classes: 2,
            loss: Loss::Softmax,
            negative: 5,
            dim: 4,
            bigram_buckets: bigrams,
            subword_buckets: 0,
            pool: Pool::Mean,
            end_of_text: false,
            bias: true,
            lr_schedule: LrSchedule::Linear,
            lr_hold: 0.25,
            seed: 7,
        }
    }

    /// A toy corpus: class 1 documents use words 0..10, class 0 words 10..20, with noise words.
    fn corpus(n: usize) -> Vec<(Vec<u64>, u64)> {
        let mut s = 1u64;
        (0..n)
            .map(|i| {
                let label = (i % 2) as u64;
                let base = if label == 1 { 0 } else { 10 };
                let ids = (0..6)
                    .map(|_| {
                        s = mix64(s);
                        if s.is_multiple_of(4) {
                            s % 20
                        } else {
                            base + s % 10
                        }
                    })
                    .collect();
                (ids, label)
            })
            .collect()
    }

    fn accuracy<O: Optimizer<f32>>(m: &Bow<O>, data: &[(Vec<u64>, u64)]) -> f32 {
        let mut w = m.new_worker();
        let right = data
            .iter()
            .filter(|(ids, y)| argmax(m.predict_instance(&mut w, ids).unwrap()) as u64 == *y)
            .count();
        right as f32 / data.len() as f32
    }

    fn train<O: Optimizer<f32>>(m: &Bow<O>, data: &[(Vec<u64>, u64)], epochs: usize) -> f32 {
        let mut w = m.new_worker();
        let mut last = 0.0;
        for _ in 0..epochs {
            let steps = m.begin(1.0).unwrap();
            let mut loss = 0.0;
            for (ids, y) in data {
                loss += m.train_instance(&mut w, &steps, ids, *y).unwrap().0;
            }
            m.finish(data.len() * 6, data.len());
            last = loss / data.len() as f32;
        }
        last
    }

    #[test]
    fn converges_with_each_optimizer() {
        let (tr, te) = (corpus(400), corpus(600)[400..].to_vec());
        let sgd = Bow::new(cfg(0), Sgd { lr: 0.5f32 }).unwrap();
        let ada = Bow::new(
            cfg(16),
            Adagrad {
                lr: 0.2f32,
                initial_accumulator: 0.1,
            },
        )
        .unwrap();
        let adam = Bow::new(cfg(16), AdamAsync::new(0.02f32, 0.9, 0.999, 1e-8)).unwrap();
        sgd.init();
        ada.init();
        adam.init();
        let l = train(&sgd, &tr, 10);
        assert!(l < 0.3 && accuracy(&sgd, &te) > 0.9, "sgd loss {l}");
        let l = train(&ada, &tr, 10);
        assert!(l < 0.3 && accuracy(&ada, &te) > 0.9, "adagrad loss {l}");
        let l = train(&adam, &tr, 10);
        assert!(l < 0.3 && accuracy(&adam, &te) > 0.9, "adam loss {l}");
        // Ten batches: the powers advanced ten times from beta.
        assert_relative_eq!(
            adam.embedding().scalars()[0],
            0.9f32.powi(11),
            epsilon = 1e-6
        );
    }

    // Reference for one SGD step (lr 0.5) on ids [1, 2], label 1, dim 2, classes 2, after init with
    // the embedding rows set to e1 = [0.1, 0.2], e2 = [0.3, -0.4] and output rows W = [[0.5, -0.5, 0.1],
    // [0.2, 0.3, -0.1]] (last column bias). numpy:
    //   h = (e1 + e2) / 2 = [0.2, -0.1]; z = W @ [h, 1] = [0.25, -0.09]; p = softmax(z)
    //   p = [0.58419, 0.41581]; loss = -log(p[1]) = 0.87753
    //   g = p - [0, 1] = [0.58419, -0.58419]; gh = g @ W[:, :2] = [0.17526, -0.46735]
    //   e1' = e1 - 0.5 * gh / 2 = [0.05619, 0.31684]
    //   W'[0] = W[0] - 0.5 * 0.58419 * [0.2, -0.1, 1] = [0.44158, -0.47079, -0.19210]
    #[test]
    fn one_sgd_step_matches_numpy() {
        let mut c = cfg(0);
        c.dim = 2;
        let m = Bow::new(c, Sgd { lr: 0.5f32 }).unwrap();
        m.embedding().write_weights(1, &[0.1, 0.2]);
        m.embedding().write_weights(2, &[0.3, -0.4]);
        m.output().write_weights(0, &[0.5, -0.5, 0.1]);
        m.output().write_weights(1, &[0.2, 0.3, -0.1]);
        let mut w = m.new_worker();
        let steps = m.begin(1.0).unwrap();
        let (loss, right) = m.train_instance(&mut w, &steps, &[1, 2], 1).unwrap();
        assert_relative_eq!(loss, 0.87753, epsilon = 1e-4);
        assert!(!right);
        let mut e1 = [0.0f32; 2];
        m.embedding().read_weights(1, &mut e1);
        assert_relative_eq!(e1[0], 0.05619, epsilon = 1e-4);
        assert_relative_eq!(e1[1], 0.31684, epsilon = 1e-4);
        let mut w0 = [0.0f32; 3];
        m.output().read_weights(0, &mut w0);
        assert_relative_eq!(w0[0], 0.44158, epsilon = 1e-4);
        assert_relative_eq!(w0[1], -0.47079, epsilon = 1e-4);
        assert_relative_eq!(w0[2], -0.19210, epsilon = 1e-4);
    }

    // Reference for one SGD step (lr 0.5) of loss = "hs" on ids [1, 2], label 1, dim 2, 3 classes
    // of counts [5, 3, 2]: the tree (huffman.rs's rule) joins labels 2 and 1 under inner node 0
    // (2 first), then node 0 and label 0 under the root, node 1. Label 1's way: root, first
    // child (code 0); node 0, second child (code 1). Embedding rows as in the softmax reference,
    // output rows (per inner node, last column bias) W = [[0.5, -0.5, 0.1], [0.2, 0.3, -0.1]].
    // numpy:
    //   sig = lambda x: 1 / (1 + np.exp(-x)); h = (e1 + e2) / 2; hb = np.append(h, 1.0)
    //   for n, c in [(1, 0), (0, 1)]:
    //       z = W[n] @ hb; p = sig(z); loss += -np.log(p if c else 1 - p); g = p - c
    //       gh += g * W[n][:2]; W2[n] = W[n] - 0.5 * g * hb
    //   loss = 1.22510 (p = 0.29373); e1' = e1 - 0.5 * gh / 2 = [0.13085, 0.10946]
    //   W2 = [[0.54378, -0.52189, 0.31891], [0.15225, 0.32388, -0.33876]]
    //   every label: [sig(z1), (1 - sig(z1)) sig(z0), (1 - sig(z1)) (1 - sig(z0))]
    //              = [0.47752, 0.29373, 0.22876]: label 0 is the most probable.
    #[test]
    fn one_hs_step_matches_numpy() {
        let mut c = cfg(0);
        c.dim = 2;
        c.classes = 3;
        c.loss = Loss::Hs;
        let mut m = Bow::new(c, Sgd { lr: 0.5f32 }).unwrap();
        m.set_label_counts(vec![5, 3, 2]).unwrap();
        assert_eq!(m.output().rows(), 2, "one row per inner node");
        m.embedding().write_weights(1, &[0.1, 0.2]);
        m.embedding().write_weights(2, &[0.3, -0.4]);
        m.output().write_weights(0, &[0.5, -0.5, 0.1]);
        m.output().write_weights(1, &[0.2, 0.3, -0.1]);
        let mut w = m.new_worker();
        let probs = m.predict_instance(&mut w, &[1, 2]).unwrap().to_vec();
        for (p, want) in probs.iter().zip([0.47752, 0.29373, 0.22876]) {
            assert_relative_eq!(*p, want, epsilon = 1e-4);
        }
        let steps = m.begin(1.0).unwrap();
        let (loss, right) = m.train_instance(&mut w, &steps, &[1, 2], 1).unwrap();
        assert_relative_eq!(loss, 1.22510, epsilon = 1e-4);
        assert!(!right, "label 0 is more probable");
        let mut e1 = [0.0f32; 2];
        m.embedding().read_weights(1, &mut e1);
        assert_relative_eq!(e1[0], 0.13085, epsilon = 1e-4);
        assert_relative_eq!(e1[1], 0.10946, epsilon = 1e-4);
        let mut row = [0.0f32; 3];
        for (node, want) in [[0.54378, -0.52189, 0.31891], [0.15225, 0.32388, -0.33876]]
            .iter()
            .enumerate()
        {
            m.output().read_weights(node, &mut row);
            for (x, y) in row.iter().zip(want) {
                assert_relative_eq!(*x, *y, epsilon = 1e-4);
            }
        }
    }

    // Reference for one SGD step (lr 0.5) of loss = "ns", negative = 3, on ids [1, 2], label 1,
    // dim 2, 4 classes of counts [4, 1, 9, 1]: with model seed 0 the first worker draws the
    // negative labels 2, 0, 3, with seed 1 the labels 0, 2, 2 (asserted below, from the rows the
    // step touched). Each row is read, then updated, before the next: label 2's second draw is
    // scored with its first update applied (fastText's `binaryLogistic`). Embedding rows as in
    // the softmax reference; output rows (last column bias) W as below. numpy:
    //   sig = lambda x: 1 / (1 + np.exp(-x)); h = (e1 + e2) / 2; hb = np.append(h, 1.0)
    //   W = np.array([[0.5, -0.5, 0.1], [0.2, 0.3, -0.1], [-0.3, 0.4, 0.2], [0.1, 0.1, 0.0]])
    //   W2 = W.copy()
    //   for r, t in [(1, 1)] + [(n, 0) for n in negs]:
    //       z = W2[r] @ hb; p = sig(z); loss += -np.log(p if t else 1 - p); g = p - t
    //       gh += g * W2[r][:2]; W2[r] -= 0.5 * g * hb
    //   e1' = e1 - 0.5 * gh / 2
    //   negs [2, 0, 3]: loss 3.00766, e1' [0.08266, 0.2444], W2 = [[0.44378, -0.47189,
    //     -0.18109], [0.25225, 0.27388, 0.16124], [-0.3525, 0.42625, -0.06249],
    //     [0.04975, 0.12512, -0.25125]]
    //   negs [0, 2, 2]: loss 2.91869, e1' [0.13543, 0.20835], W2 = [[0.44378, -0.47189,
    //     -0.18109], [0.25225, 0.27388, 0.16124], [-0.39812, 0.44906, -0.29059], [0.1, 0.1, 0]]
    //   every label's sig(W @ hb) = [0.56218, 0.47752, 0.52498, 0.5025]: label 0 is first.
    #[test]
    fn one_ns_step_matches_numpy() {
        let rows = [
            [0.5, -0.5, 0.1],
            [0.2, 0.3, -0.1],
            [-0.3, 0.4, 0.2],
            [0.1, 0.1, 0.0],
        ];
        let cases = [
            (
                0,
                [2, 0, 3],
                3.00766,
                [0.08266, 0.2444],
                [
                    [0.44378, -0.47189, -0.18109],
                    [0.25225, 0.27388, 0.16124],
                    [-0.3525, 0.42625, -0.06249],
                    [0.04975, 0.12512, -0.25125],
                ],
            ),
            (
                1,
                [0, 2, 2],
                2.91869,
                [0.13543, 0.20835],
                [
                    [0.44378, -0.47189, -0.18109],
                    [0.25225, 0.27388, 0.16124],
                    [-0.39812, 0.44906, -0.29059],
                    [0.1, 0.1, 0.0],
                ],
            ),
        ];
        for (seed, negs, want_loss, want_e1, want_rows) in cases {
            let mut c = cfg(0);
            (c.dim, c.classes, c.loss, c.negative, c.seed) = (2, 4, Loss::Ns, 3, seed);
            let mut m = Bow::new(c, Sgd { lr: 0.5f32 }).unwrap();
            m.set_label_counts(vec![4, 1, 9, 1]).unwrap();
            assert_eq!(m.output().rows(), 4, "one row per class");
            m.embedding().write_weights(1, &[0.1, 0.2]);
            m.embedding().write_weights(2, &[0.3, -0.4]);
            for (r, row) in rows.iter().enumerate() {
                m.output().write_weights(r, row);
            }
            let mut w = m.new_worker();
            let probs = m.predict_instance(&mut w, &[1, 2]).unwrap().to_vec();
            for (p, want) in probs.iter().zip([0.56218, 0.47752, 0.52498, 0.5025]) {
                assert_relative_eq!(*p, want, epsilon = 1e-4);
            }
            let steps = m.begin(1.0).unwrap();
            let (loss, right) = m.train_instance(&mut w, &steps, &[1, 2], 1).unwrap();
            let touched: Vec<u32> = w.head.grads.iter().map(|g| g.0).collect();
            assert_eq!(touched[0], 1, "seed {seed}: the gold first");
            assert_eq!(touched[1..], negs, "seed {seed}: the negatives drawn");
            assert_relative_eq!(loss, want_loss, epsilon = 1e-4);
            assert!(!right, "label 0 is more probable");
            let mut e1 = [0.0f32; 2];
            m.embedding().read_weights(1, &mut e1);
            for (x, y) in e1.iter().zip(want_e1) {
                assert_relative_eq!(*x, y, epsilon = 1e-4);
            }
            let mut row = [0.0f32; 3];
            for (r, want) in want_rows.iter().enumerate() {
                m.output().read_weights(r, &mut row);
                for (x, y) in row.iter().zip(want) {
                    assert_relative_eq!(*x, *y, epsilon = 1e-4);
                }
            }
        }
    }

    #[test]
    fn ns_draws_negatives_by_the_square_roots_of_the_counts_and_never_the_gold() {
        // Counts [4, 1, 9, 0]: weights [2, 1, 3, 1] (a count of 0 drawn as 1); with gold 1 the
        // negatives are 0, 2 and 3 in shares 2/6, 3/6 and 1/6. 30,000 draws: a share's standard
        // error is below 0.003, the tolerance 0.015.
        let mut c = cfg(0);
        (c.classes, c.loss, c.negative) = (4, Loss::Ns, 5);
        let mut m = Bow::new(c.clone(), Sgd { lr: 0.0f32 }).unwrap();
        m.set_label_counts(vec![4, 1, 9, 0]).unwrap();
        let draws = |m: &Bow<Sgd<f32>>, n: usize| {
            let mut w = m.numbered_worker(n);
            let steps = m.begin(0.0).unwrap();
            let mut drawn = Vec::new();
            for _ in 0..6000 {
                m.train_instance(&mut w, &steps, &[1, 2], 1).unwrap();
                assert_eq!(w.head.grads[0].0, 1, "the gold first");
                drawn.extend(w.head.grads[1..].iter().map(|g| g.0 as usize));
            }
            drawn
        };
        let drawn = draws(&m, 0);
        assert_eq!(drawn.len(), 30_000, "5 negatives per instance");
        let mut share = [0.0f64; 4];
        drawn.iter().for_each(|&c| share[c] += 1.0 / 30_000.0);
        for (got, want) in share.iter().zip([2.0 / 6.0, 0.0, 3.0 / 6.0, 1.0 / 6.0]) {
            assert_relative_eq!(*got, want, epsilon = 0.015);
        }
        // Each worker has its own stream, the same for the same seed and worker number.
        assert_eq!(draws(&m, 0), drawn);
        assert_ne!(draws(&m, 1), drawn);
        let mut other = Bow::new(c, Sgd { lr: 0.0f32 }).unwrap();
        other.set_label_counts(vec![4, 1, 9, 0]).unwrap();
        assert_eq!(draws(&other, 0), drawn);
    }

    /// A corpus of `classes` labels of falling frequency (label `c` about twice as often as
    /// `c + 1`), each with its own 4 words of the vocabulary of `4 * classes`, plus noise words.
    fn many_labels(n: usize, classes: u64) -> Vec<(Vec<u64>, u64)> {
        let mut s = 11u64;
        (0..n)
            .map(|_| {
                s = mix64(s);
                let label = (s.trailing_zeros() as u64).min(classes - 1);
                let ids = (0..5)
                    .map(|_| {
                        s = mix64(s);
                        if s.is_multiple_of(5) {
                            s % (4 * classes)
                        } else {
                            4 * label + s % 4
                        }
                    })
                    .collect();
                (ids, label)
            })
            .collect()
    }

    #[test]
    fn hs_learns_and_its_search_finds_the_most_probable_labels() {
        let classes = 12u64;
        let (tr, te) = (many_labels(3000, classes), many_labels(400, classes));
        let mut c = cfg(0);
        (c.classes, c.vocab, c.dim, c.bias) = (12, 48, 8, false);
        c.loss = Loss::Hs;
        let mut m = Bow::new(c, Sgd { lr: 0.5f32 }).unwrap();
        let mut counts = vec![0u64; 12];
        tr.iter().for_each(|(_, y)| counts[*y as usize] += 1);
        m.set_label_counts(counts.clone()).unwrap();
        assert_eq!(m.label_counts(), Some(&counts[..]));
        m.init();
        let loss = train(&m, &tr, 5);
        assert!(loss < 0.6, "loss {loss}");
        assert!(accuracy(&m, &te) > 0.9, "accuracy {}", accuracy(&m, &te));
        // The search gives what every label's probability gives, with k and the threshold.
        let mut w = m.new_worker();
        let (mut found, mut want) = (Vec::new(), Vec::new());
        for (ids, _) in &te[..50] {
            let probs = m.predict_instance(&mut w, ids).unwrap().to_vec();
            assert_relative_eq!(probs.iter().sum::<f32>(), 1.0, epsilon = 1e-5);
            m.forward(&mut w);
            let scores = m.head.scores(&m.fc, &w.hidden, &[]);
            for top in [(1, 0.0), (3, 0.0), (12, 0.0), (12, 0.05), (2, 0.9)] {
                let top = TopK {
                    k: top.0,
                    threshold: top.1,
                };
                scores.select(top, &mut found);
                top.select(&probs, &mut want);
                assert_eq!(found.len(), want.len(), "{top:?}");
                for (f, w) in found.iter().zip(&want) {
                    assert_eq!(f.0, w.0, "{top:?}");
                    assert_relative_eq!(f.1, w.1, epsilon = 1e-5);
                }
            }
        }
    }

    /// Trains `m` (`loss = "ns"`, 13 classes) for 5 epochs on `tr` (labels 0 to 11) with the
    /// training part's counts (label 12's is 0); returns the last epoch's mean loss, the test
    /// accuracy on `te`, and label 12's highest probability on `te`.
    fn train_ns<O: Optimizer<f32>>(
        mut m: Bow<O>,
        tr: &[(Vec<u64>, u64)],
        te: &[(Vec<u64>, u64)],
    ) -> (f32, f32, f32) {
        let mut counts = vec![0u64; 13];
        tr.iter().for_each(|(_, y)| counts[*y as usize] += 1);
        m.set_label_counts(counts.clone()).unwrap();
        assert_eq!(m.label_counts(), Some(&counts[..]));
        m.init();
        let loss = train(&m, tr, 5);
        let mut w = m.new_worker();
        let unseen = te
            .iter()
            .map(|(ids, _)| m.predict_instance(&mut w, ids).unwrap()[12])
            .fold(0.0f32, f32::max);
        (loss, accuracy(&m, te), unseen)
    }

    #[test]
    fn ns_learns_many_labels_with_each_optimizer() {
        let (tr, te) = (many_labels(3000, 12), many_labels(400, 12));
        let mut c = cfg(0);
        (c.classes, c.vocab, c.dim, c.bias) = (13, 48, 8, false);
        c.loss = Loss::Ns;
        let sgd = Bow::new(c.clone(), Sgd { lr: 0.5f32 }).unwrap();
        let adagrad = Adagrad {
            lr: 0.2f32,
            initial_accumulator: 0.1,
        };
        let ada = Bow::new(c.clone(), adagrad).unwrap();
        let adam = Bow::new(c, AdamAsync::new(0.02f32, 0.9, 0.999, 1e-8)).unwrap();
        for (name, (loss, acc, unseen)) in [
            ("sgd", train_ns(sgd, &tr, &te)),
            ("adagrad", train_ns(ada, &tr, &te)),
            ("adam", train_ns(adam, &tr, &te)),
        ] {
            // The loss sums 6 binary losses: the gold's and 5 negatives'.
            assert!(loss < 0.2, "{name}: loss {loss}");
            assert!(acc > 0.95, "{name}: accuracy {acc}");
            // Label 12, never in the data, drawn as a negative as if once: pushed below 1/2.
            assert!(
                unseen < 0.45,
                "{name}: label 12's probability up to {unseen}"
            );
        }
    }

    #[test]
    fn ns_ranks_every_label_on_few_instances_of_many_labels() {
        let mut c = cfg(0);
        c.loss = Loss::Ns;
        for (classes, every) in [(2, 1), (31, 1), (32, 2), (1000, 62), (9764, 610)] {
            c.classes = classes;
            let m = Bow::new(c.clone(), Sgd { lr: 0.1f32 }).unwrap();
            assert_eq!(m.rank_every(), every, "{classes} classes");
        }
        // The other losses tell the accuracy of every instance at no cost.
        for loss in [Loss::Softmax, Loss::Hs, Loss::Ova] {
            c.loss = loss;
            assert_eq!(
                Bow::new(c.clone(), Sgd { lr: 0.1f32 })
                    .unwrap()
                    .rank_every(),
                1
            );
        }
    }

    #[test]
    fn ova_learns_several_labels_per_instance() {
        // Instances of words of label a, of b, or of both: labels [a], [b] or [a, b] (a and b
        // among 3 classes).
        let mut c = cfg(0);
        c.classes = 3;
        c.loss = Loss::Ova;
        c.bias = false;
        let m = Bow::new(c, Sgd { lr: 0.5f32 }).unwrap();
        m.init();
        let mut w = m.new_worker();
        let data: Vec<(Vec<u64>, Vec<u64>)> = (0..600)
            .map(|i| match i % 3 {
                0 => (vec![1, 2, 3], vec![0]),
                1 => (vec![11, 12, 13], vec![2]),
                _ => (vec![1, 2, 11, 12], vec![0, 2]),
            })
            .collect();
        for _ in 0..5 {
            let steps = m.begin(1.0).unwrap();
            for (ids, labels) in &data {
                m.train_labels(&mut w, &steps, ids, labels).unwrap();
            }
            m.finish(0, 0);
        }
        let probs = m
            .predict_instance(&mut w, &[1, 2, 11, 12])
            .unwrap()
            .to_vec();
        assert!(
            probs[0] > 0.9 && probs[2] > 0.9 && probs[1] < 0.1,
            "{probs:?}"
        );
        let probs = m.predict_instance(&mut w, &[1, 2, 3]).unwrap().to_vec();
        assert!(probs[0] > 0.9 && probs[2] < 0.1, "{probs:?}");
        // The loss is the sum of the classes' binary losses: three near-certain ones.
        let steps = m.begin(0.0).unwrap();
        let (loss, right) = m
            .train_labels(&mut w, &steps, &[1, 2, 11, 12], &[0, 2])
            .unwrap();
        assert!(loss < 0.3 && right, "{loss}");
        // Softmax and hs take one label.
        for loss in [Loss::Softmax, Loss::Hs] {
            let mut c = cfg(0);
            c.loss = loss;
            let m = Bow::new(c, Sgd { lr: 0.5f32 }).unwrap();
            let mut w = m.new_worker();
            let steps = m.begin(1.0).unwrap();
            let e = m
                .train_labels(&mut w, &steps, &[1], &[0, 1])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("expected one label")
                    && e.contains("several labels need loss = \"ova\"")
                    && e.contains("got 2 values"),
                "{e}"
            );
        }
    }

    #[test]
    fn bigrams_hash_consecutive_ids_into_buckets() {
        let m = Bow::new(cfg(5), Sgd { lr: 0.1f32 }).unwrap();
        let mut w = m.new_worker();
        m.gather_rows(&mut w, &[3, 4, 3]).unwrap();
        let h1 = (3 * FASTTEXT_NGRAM_MULT + 4) % 5;
        let h2 = (4 * FASTTEXT_NGRAM_MULT + 3) % 5;
        assert_eq!(w.rows, vec![3, 4, 3, 20 + h1 as usize, 20 + h2 as usize]);
    }

    #[test]
    fn end_of_text_adds_its_row_and_last_bigram() {
        let mut c = cfg(5);
        c.end_of_text = true;
        let m = Bow::new(c, Sgd { lr: 0.1f32 }).unwrap();
        assert_eq!(m.embedding().rows(), 20 + 5 + 1);
        let mut w = m.new_worker();
        m.gather_rows(&mut w, &[3, 4]).unwrap();
        let h34 = (3 * FASTTEXT_NGRAM_MULT + 4) % 5;
        let h4e = (4 * FASTTEXT_NGRAM_MULT + 20) % 5; // the end of text reads as id vocab = 20
        assert_eq!(w.rows, vec![3, 4, 20 + h34 as usize, 20 + h4e as usize, 25]);
        // An instance without words is its end-of-text row alone, not an empty (zero) mean.
        m.gather_rows(&mut w, &[]).unwrap();
        assert_eq!(w.rows, vec![25]);
        let mut c = cfg(0);
        c.end_of_text = true;
        let m = Bow::new(c, Sgd { lr: 0.1f32 }).unwrap();
        m.gather_rows(&mut w, &[3, 4]).unwrap();
        assert_eq!(w.rows, vec![3, 4, 20]);
    }

    #[test]
    fn subword_ids_get_their_rows_and_stay_out_of_bigrams() {
        // 20 words, 5 bigram buckets (rows 20..25), the end-of-text row 25, 8 n-gram buckets
        // (rows 26..34): ids 20..28 of the data are n-gram buckets 0..8.
        let mut c = cfg(5);
        c.end_of_text = true;
        c.subword_buckets = 8;
        let m = Bow::new(c, Sgd { lr: 0.1f32 }).unwrap();
        assert_eq!(m.embedding().rows(), 20 + 5 + 1 + 8);
        let mut w = m.new_worker();
        // Word 3 with n-grams 0 and 7, word 4 with n-gram 2: fastText's line layout.
        m.gather_rows(&mut w, &[3, 20, 27, 4, 22]).unwrap();
        let h34 = (3 * FASTTEXT_NGRAM_MULT + 4) % 5;
        let h4e = (4 * FASTTEXT_NGRAM_MULT + 20) % 5;
        assert_eq!(
            w.rows,
            vec![3, 26, 33, 4, 28, 20 + h34 as usize, 20 + h4e as usize, 25]
        );
        let e = m
            .predict_instance(&mut w, &[3, 28])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("word id 28 at offset 1") && e.contains("subword_buckets = 8"),
            "{e}"
        );
        // The n-gram rows start at zero, as the bigram rows.
        m.init();
        let mut row = [1.0f32; 4];
        for r in 20..34 {
            m.embedding().read_weights(r, &mut row);
            assert_eq!(row == [0.0; 4], r != 25, "row {r}: {row:?}");
        }
    }

    #[test]
    fn without_bias_the_bias_column_stays_zero_and_scores_ignore_it() {
        let mut c = cfg(0);
        c.bias = false;
        let m = Bow::new(c, Sgd { lr: 0.5f32 }).unwrap();
        m.init();
        let mut w = m.new_worker();
        let steps = m.begin(1.0).unwrap();
        for (ids, label) in corpus(50) {
            m.train_instance(&mut w, &steps, &ids, label).unwrap();
        }
        let mut row = vec![0.0f32; 5];
        for c in 0..2 {
            m.fc.read_weights(c, &mut row);
            assert_eq!(row[4], 0.0, "class {c}: {row:?}");
            assert!(
                row[..4].iter().any(|&x| x != 0.0),
                "class {c} learned nothing"
            );
        }
        // A bias written into the column (as an old model's) does not change the scores.
        let probs = m.predict_instance(&mut w, &[1, 2]).unwrap().to_vec();
        m.fc.read_weights(0, &mut row);
        row[4] = 3.0;
        m.fc.write_weights(0, &row);
        assert_eq!(m.predict_instance(&mut w, &[1, 2]).unwrap(), &probs[..]);
    }

    #[test]
    fn bad_ids_labels_and_configs_are_named() {
        let m = Bow::new(cfg(0), Sgd { lr: 0.1f32 }).unwrap();
        let mut w = m.new_worker();
        let steps = m.begin(1.0).unwrap();
        let e = m
            .train_instance(&mut w, &steps, &[1, 25], 0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"words\"") && e.contains("word id 25 at offset 1"),
            "{e}"
        );
        let e = m
            .train_instance(&mut w, &steps, &[1], 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"label\"") && e.contains("label 2"), "{e}");
        let mut c = cfg(0);
        c.classes = 1;
        let e = Bow::new(c, Sgd { lr: 0.1f32 }).unwrap_err().to_string();
        assert!(e.contains("classes"), "{e}");
        let mut c = cfg(0);
        c.label_slot = "words".into();
        assert!(Bow::new(c, Sgd { lr: 0.1f32 }).is_err());
        for hold in [-0.1, 1.0, f64::NAN] {
            let mut c = cfg(0);
            c.lr_hold = hold;
            let e = Bow::new(c, Sgd { lr: 0.1f32 }).unwrap_err().to_string();
            assert!(e.contains("lr_hold"), "{hold}: {e}");
        }
    }

    #[test]
    fn init_is_deterministic_and_bounded() {
        let mut c = cfg(3);
        c.end_of_text = true;
        let a = Bow::new(c.clone(), Sgd { lr: 0.1f32 }).unwrap();
        let b = Bow::new(c, Sgd { lr: 0.1f32 }).unwrap();
        a.init();
        b.init();
        let (mut x, mut y) = ([0.0f32; 4], [0.0f32; 4]);
        // 20 words, 3 bigram buckets, the end-of-text row.
        for r in 0..24 {
            a.embedding().read_weights(r, &mut x);
            b.embedding().read_weights(r, &mut y);
            assert_eq!(x, y);
            assert!(x.iter().all(|v| v.abs() <= 0.25));
            let bucket = (20..23).contains(&r);
            assert_eq!(x.iter().all(|&v| v == 0.0), bucket, "row {r}: {x:?}");
        }
    }
}
