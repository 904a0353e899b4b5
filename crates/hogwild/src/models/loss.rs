//! The bag-of-words classifier's output layer and loss (fastText's `-loss`), from the pooled
//! hidden vector `h` (with its trailing bias input) and the output table's rows:
//!
//! - `softmax`: one row per class, `p = softmax(W h)`, loss `-ln p[gold]`. Every class's row is
//!   read and updated for every instance.
//! - `hs` (hierarchical softmax): one row per inner node of a Huffman tree over the labels'
//!   counts ([`Huffman`]); a label's probability is the product of the binary decisions
//!   `sigmoid(+-w_node . h)` on its way from the root, and the loss and update touch only those
//!   nodes: about `log2(classes)` rows per instance, fewer for frequent labels. Predictions search
//!   the tree depth first, leaving out branches less probable than the k-th best leaf found or
//!   the threshold (fastText's `dfs`).
//! - `ova` (one-vs-all): one independent sigmoid per class, `p_c = sigmoid(w_c . h)`, loss
//!   `sum_c -ln p(y_c)`, with `y_c = 1` for each of the instance's labels: an instance may have
//!   several, and the probabilities of a prediction do not sum to 1.
//! - `ns` (negative sampling): the gold label's row with target 1 and `negative` other labels'
//!   rows, drawn with probability proportional to the square root of their counts (the gold
//!   drawn again), with target 0, each a sigmoid: `1 + negative` rows per instance whatever the
//!   number of labels. A label's probability is its own sigmoid, as with `ova`, so a prediction
//!   scores every label.
//!
//! The gradient of the loss with respect to each touched row's score (`p - y` for each of them)
//! is added through the row's current weights to the gradient reaching `h`, and then applied to
//! the row, row by row, as fastText does.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::ctr::{logloss, sigmoid};
use super::huffman::{Huffman, Node};
use super::labels::{Scores, TopK};
use crate::optim::Optimizer;
use crate::rng::{AliasTable, XorShift64Star};
use crate::store::Table;

/// The classifier's loss (fastText's `-loss`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// A softmax over all classes; one label per instance.
    #[default]
    Softmax,
    /// Hierarchical softmax over a Huffman tree of the label counts; one label per instance.
    Hs,
    /// An independent sigmoid per class; one or more labels per instance.
    Ova,
    /// A sigmoid for the gold label and for a few labels drawn by their counts; one label per
    /// instance.
    Ns,
}

impl Loss {
    /// The rows of the output table for `classes` classes: the tree's inner nodes with `hs`.
    pub fn output_rows(self, classes: usize) -> usize {
        match self {
            Loss::Hs => classes - 1,
            Loss::Softmax | Loss::Ova | Loss::Ns => classes,
        }
    }

    /// Whether an instance may have more than one label.
    pub fn multi_label(self) -> bool {
        self == Loss::Ova
    }

    /// Whether the loss depends on the labels' counts in the training data (kept in the model).
    pub fn needs_counts(self) -> bool {
        matches!(self, Loss::Hs | Loss::Ns)
    }

    /// What the loss does with the labels' counts, for messages (`loss = "hs" builds its tree
    /// from the labels' counts`).
    pub fn counts_use(self) -> &'static str {
        match self {
            Loss::Ns => "draws its negative labels",
            _ => "builds its tree",
        }
    }

    /// The name as the configuration writes it.
    pub fn name(self) -> &'static str {
        match self {
            Loss::Softmax => "softmax",
            Loss::Hs => "hs",
            Loss::Ova => "ova",
            Loss::Ns => "ns",
        }
    }
}

const LOSSES: [Loss; 4] = [Loss::Softmax, Loss::Hs, Loss::Ova, Loss::Ns];

/// A loss by name, refused with the names there are (the configuration's error names the field:
/// a model section's own parse error points at the section, not the line).
impl<'de> Deserialize<'de> for Loss {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        LOSSES
            .into_iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "loss = \"{name}\" is no loss: give \"softmax\", \"hs\", \"ova\" or \"ns\""
                ))
            })
    }
}

/// The output layer's structure beyond its table: the tree of `hs`, the negatives of `ns`.
#[derive(Debug, Clone)]
pub(crate) enum Head {
    Softmax,
    Hs(Huffman),
    Ova,
    Ns {
        /// Draws a label with probability proportional to the square root of its count.
        noise: AliasTable,
        /// Negative labels per instance.
        negative: usize,
    },
}

/// What a training step's backward pass through the output layer needs: where the gradient
/// reaching the pooled vector goes, and the optimizer call that updates the rows.
pub(crate) struct Backward<'a, O: Optimizer<f32>> {
    pub(crate) grad_hidden: &'a mut [f32],
    pub(crate) opt: &'a O,
    pub(crate) step: &'a O::Step,
}

/// One worker's buffers for the output layer.
#[derive(Debug)]
pub(crate) struct HeadScratch {
    /// Softmax, ova and ns: every class's probability (after [`Head::loss`] ranked them).
    pub(crate) probs: Vec<f32>,
    /// Per output row the instance touched: the row and the gradient of the loss on its score.
    pub(crate) grads: Vec<(u32, f32)>,
    /// hs: the scores of the gold label's inner nodes.
    z: Vec<f32>,
    /// ns: the worker's own stream of negative labels.
    rng: XorShift64Star,
}

impl HeadScratch {
    /// The buffers for `classes` classes, drawing negative labels from the stream of `seed`.
    pub(crate) fn new(classes: usize, seed: u64) -> Self {
        Self {
            probs: vec![0.0; classes],
            grads: Vec::new(),
            z: Vec::new(),
            rng: XorShift64Star::from_seed(seed),
        }
    }
}

impl Head {
    /// The head of `loss` over labels of `counts` (one per class; `hs` and `ns` read them),
    /// drawing `negative` labels per instance with `ns`.
    pub(crate) fn new(loss: Loss, counts: &[u64], negative: usize) -> Self {
        match loss {
            Loss::Softmax => Head::Softmax,
            Loss::Hs => Head::Hs(Huffman::new(counts)),
            Loss::Ova => Head::Ova,
            Loss::Ns => {
                // fastText's table of counts^0.5, drawn exactly. A label of count 0 (in the
                // labels' vocabulary but not in the training data) is drawn as if of count 1:
                // never drawn, its row would stay zero and every prediction give it 1/2.
                let weights: Vec<f64> = counts.iter().map(|&c| (c.max(1) as f64).sqrt()).collect();
                Head::Ns {
                    noise: AliasTable::new(&weights),
                    negative,
                }
            }
        }
    }

    /// The loss of an instance of labels `golds` (one, except with ova) and pooled vector `h`,
    /// and whether its most probable class is one of `golds` (equal probabilities counting for
    /// the gold), before any update. With `backward`, also the gradients: each touched row's
    /// gradient is added through the row's weights to `backward.grad_hidden`, then the row is
    /// updated, before the next row is read (fastText's `binaryLogistic`: a negative label drawn
    /// twice is scored the second time with its first update applied), and the rows and their
    /// gradients are listed in `s.grads`.
    ///
    /// `ns` reads only the gold's and the negatives' rows for the loss: with `rank` it also
    /// scores every class to tell whether the gold is the most probable (without `backward`
    /// leaving their probabilities in `s.probs`), and without it that is not known (`None`);
    /// the other losses always tell.
    #[inline]
    pub(crate) fn loss<O: Optimizer<f32>>(
        &self,
        fc: &Table,
        h: &[f32],
        golds: &[usize],
        s: &mut HeadScratch,
        mut backward: Option<Backward<'_, O>>,
        rank: bool,
    ) -> (f32, Option<bool>) {
        s.grads.clear();
        let training = backward.is_some();
        let mut push = |row: usize, g: f32, s: &mut HeadScratch| {
            if let Some(b) = backward.as_mut() {
                fc.add_weights_to(row, g, b.grad_hidden);
                fc.update_row(b.opt, b.step, row, h, g);
                s.grads.push((row as u32, g));
            }
        };
        match self {
            Head::Softmax | Head::Ova => {
                let loss = self.dense(fc, h, golds, &mut s.probs);
                let right = golds.contains(&super::bow::argmax(&s.probs));
                for c in 0..s.probs.len() {
                    let g = s.probs[c] - y(golds, c);
                    push(c, g, s);
                }
                (loss, Some(right))
            }
            Head::Hs(tree) => {
                let gold = golds[0];
                s.z.clear();
                let mut loss = 0.0;
                for (&node, &code) in tree.points(gold).iter().zip(tree.codes(gold)) {
                    let z = fc.dot(node as usize, h);
                    let target = f32::from(u8::from(code));
                    loss += logloss(z, target);
                    s.z.push(z);
                    push(node as usize, sigmoid(z) - target, s);
                }
                // The search reads only nodes beside the gold's way, which were not updated.
                let right = !self.beaten(tree, fc, h, gold, &s.z, -loss);
                (loss, Some(right))
            }
            Head::Ns { noise, negative } => {
                let gold = golds[0];
                let right = rank.then(|| {
                    // By the scores: the sigmoid keeps their order (and ties none that
                    // saturate), and training reads no probability.
                    for (c, p) in s.probs.iter_mut().enumerate() {
                        *p = fc.dot(c, h);
                    }
                    let best = super::bow::argmax(&s.probs);
                    if !training {
                        s.probs.iter_mut().for_each(|p| *p = sigmoid(*p));
                    }
                    best == gold
                });
                let z = fc.dot(gold, h);
                let mut loss = logloss(z, 1.0);
                push(gold, sigmoid(z) - 1.0, s);
                for _ in 0..*negative {
                    // The gold is drawn again (fastText's getNegative); counts of at least 1
                    // give the other labels a positive share, so this ends.
                    let neg = loop {
                        let c = noise.sample(s.rng.next()) as usize;
                        if c != gold {
                            break c;
                        }
                    };
                    let z = fc.dot(neg, h);
                    loss += logloss(z, 0.0);
                    push(neg, sigmoid(z), s);
                }
                (loss, right)
            }
        }
    }

    /// Softmax and ova: every class's probability into `probs`, and the loss of labels `golds`.
    #[inline]
    fn dense(&self, fc: &Table, h: &[f32], golds: &[usize], probs: &mut [f32]) -> f32 {
        let mut max = f32::NEG_INFINITY;
        for (c, p) in probs.iter_mut().enumerate() {
            *p = fc.dot(c, h);
            max = max.max(*p);
        }
        if matches!(self, Head::Softmax) {
            let mut sum = 0.0;
            for p in probs.iter_mut() {
                *p = (*p - max).exp();
                sum += *p;
            }
            let inv = 1.0 / sum;
            probs.iter_mut().for_each(|p| *p *= inv);
            -probs[golds[0]].max(1e-30).ln()
        } else {
            let mut loss = 0.0;
            for (c, p) in probs.iter_mut().enumerate() {
                loss += logloss(*p, y(golds, c));
                *p = sigmoid(*p);
            }
            loss
        }
    }

    /// hs: whether a leaf other than `gold` (of log-probability `gold_score`, its nodes' scores
    /// `z`) is more probable: a search of the branches beside the gold's way down, each only
    /// while it may hold a leaf above the gold. A gold of probability above 1/2 is never beaten,
    /// and is found so without reading a row.
    fn beaten(
        &self,
        tree: &Huffman,
        fc: &Table,
        h: &[f32],
        gold: usize,
        z: &[f32],
        gold_score: f32,
    ) -> bool {
        let mut prefix = 0.0;
        for ((&node, &code), &z) in tree.points(gold).iter().zip(tree.codes(gold)).zip(z) {
            let side = tree.children(node as usize)[usize::from(!code)];
            let side_score = prefix - logloss(z, f32::from(u8::from(!code)));
            if above(tree, fc, h, side, side_score, gold_score) {
                return true;
            }
            prefix -= logloss(z, f32::from(u8::from(code)));
        }
        false
    }

    /// Every class's probability, into `s.probs`, without a loss (no negatives drawn).
    pub(crate) fn predict(&self, fc: &Table, h: &[f32], s: &mut HeadScratch) {
        match self {
            // Any label: only the probabilities are read.
            Head::Softmax | Head::Ova => _ = self.dense(fc, h, &[0], &mut s.probs),
            Head::Ns { .. } => sigmoids(fc, h, &mut s.probs),
            Head::Hs(_) => self.scores(fc, h, &[]).all(&mut s.probs),
        }
    }

    /// Every class's probability (in `out`, in class order) after [`Head::loss`] filled
    /// `s.probs` (softmax, ova, ns ranked); hs walks the whole tree.
    pub(crate) fn scores<'a>(
        &'a self,
        fc: &'a Table,
        h: &'a [f32],
        probs: &'a [f32],
    ) -> Scored<'a> {
        match self {
            Head::Softmax | Head::Ova | Head::Ns { .. } => Scored::Dense(probs),
            Head::Hs(tree) => Scored::Tree { tree, fc, h },
        }
    }
}

/// Each class's own probability, the sigmoid of its score (ova's and ns's predictions).
#[inline]
fn sigmoids(fc: &Table, h: &[f32], probs: &mut [f32]) {
    for (c, p) in probs.iter_mut().enumerate() {
        *p = sigmoid(fc.dot(c, h));
    }
}

/// 1 when class `c` is one of the instance's labels, else 0.
#[inline]
fn y(golds: &[usize], c: usize) -> f32 {
    f32::from(u8::from(golds.contains(&c)))
}

/// ln of the probability of the branch of score `z` that the code `second` takes.
#[inline]
fn ln_branch(z: f32, second: bool) -> f32 {
    -logloss(z, f32::from(u8::from(second)))
}

/// Whether the subtree `node`, reached with log-probability `score`, holds a leaf of
/// log-probability above `bound`: the more probable child first, so that a leaf above is usually
/// found on the first way down.
fn above(tree: &Huffman, fc: &Table, h: &[f32], node: Node, score: f32, bound: f32) -> bool {
    if score <= bound {
        return false;
    }
    let Node::Inner(i) = node else {
        return true;
    };
    let z = fc.dot(i, h);
    let [first, second] = tree.children(i);
    let (a, b) = (score + ln_branch(z, false), score + ln_branch(z, true));
    let order = if z > 0.0 {
        [(second, b), (first, a)]
    } else {
        [(first, a), (second, b)]
    };
    order
        .into_iter()
        .any(|(child, s)| above(tree, fc, h, child, s, bound))
}

/// An instance's class probabilities as the head gives them, for [`super::labels::Labels`].
pub(crate) enum Scored<'a> {
    /// Every class's probability, in class order.
    Dense(&'a [f32]),
    /// hs: the tree and the vector to walk it with.
    Tree {
        tree: &'a Huffman,
        fc: &'a Table,
        h: &'a [f32],
    },
}

/// A leaf found by the top-k search, ordered so that the heap's top is the first to drop: the
/// least probable, and of equal ones the larger class.
#[derive(Debug, Clone, Copy)]
struct Found {
    score: f32,
    class: usize,
}

impl PartialEq for Found {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Found {}
impl PartialOrd for Found {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Found {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then(self.class.cmp(&other.class))
    }
}

/// fastText's depth-first top-k search: a branch is left out when less probable than the
/// threshold, or than the k-th best leaf found when k are found.
fn search(
    tree: &Huffman,
    fc: &Table,
    h: &[f32],
    node: Node,
    score: f32,
    (k, floor): (usize, f32),
    heap: &mut BinaryHeap<Found>,
) {
    if score < floor || (heap.len() == k && heap.peek().is_some_and(|f| score < f.score)) {
        return;
    }
    match node {
        Node::Leaf(class) => {
            heap.push(Found { score, class });
            if heap.len() > k {
                heap.pop();
            }
        }
        Node::Inner(i) => {
            let z = fc.dot(i, h);
            let [first, second] = tree.children(i);
            search(
                tree,
                fc,
                h,
                first,
                score + ln_branch(z, false),
                (k, floor),
                heap,
            );
            search(
                tree,
                fc,
                h,
                second,
                score + ln_branch(z, true),
                (k, floor),
                heap,
            );
        }
    }
}

impl Scores for Scored<'_> {
    fn all(&self, out: &mut Vec<f32>) {
        match *self {
            Scored::Dense(probs) => probs.all(out),
            Scored::Tree { tree, fc, h } => {
                // A node's parent was made after it: from the root down, each node's log-
                // probability is known before its children's.
                let inner = tree.leaves() - 1;
                let mut ln_p = vec![0.0f32; inner];
                out.clear();
                out.resize(tree.leaves(), 0.0);
                for i in (0..inner).rev() {
                    let z = fc.dot(i, h);
                    for (child, second) in tree.children(i).into_iter().zip([false, true]) {
                        let p = ln_p[i] + ln_branch(z, second);
                        match child {
                            Node::Leaf(c) => out[c] = p.exp(),
                            Node::Inner(j) => ln_p[j] = p,
                        }
                    }
                }
            }
        }
    }

    fn select(&self, top: TopK, out: &mut Vec<(usize, f32)>) {
        match *self {
            Scored::Dense(probs) => top.select(probs, out),
            Scored::Tree { tree, fc, h } => {
                let k = top.k.min(tree.leaves());
                let mut heap = BinaryHeap::with_capacity(k + 1);
                let root = Node::Inner(tree.root());
                search(tree, fc, h, root, 0.0, (k, top.threshold.ln()), &mut heap);
                out.clear();
                // Ascending in the heap's order: most probable first, equal ones by class.
                out.extend(
                    heap.into_sorted_vec()
                        .into_iter()
                        .map(|f| (f.class, f.score.exp())),
                );
            }
        }
    }
}
