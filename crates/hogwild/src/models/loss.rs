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
//!
//! The gradient of the loss with respect to each touched row's score (`p - y` for each of them)
//! is collected with the rows it belongs to, added through the rows' current weights to the
//! gradient reaching `h`, and applied to the rows after that, as fastText does.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::ctr::{logloss, sigmoid};
use super::huffman::{Huffman, Node};
use super::labels::{Scores, TopK};
use crate::optim::Optimizer;
use crate::store::Table;

/// The classifier's loss (fastText's `-loss`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// A softmax over all classes; one label per instance.
    #[default]
    Softmax,
    /// Hierarchical softmax over a Huffman tree of the label counts; one label per instance.
    Hs,
    /// An independent sigmoid per class; one or more labels per instance.
    Ova,
}

impl Loss {
    /// The rows of the output table for `classes` classes: the tree's inner nodes with `hs`.
    pub fn output_rows(self, classes: usize) -> usize {
        match self {
            Loss::Hs => classes - 1,
            Loss::Softmax | Loss::Ova => classes,
        }
    }

    /// Whether an instance may have more than one label.
    pub fn multi_label(self) -> bool {
        self == Loss::Ova
    }

    /// Whether the loss depends on the labels' counts in the training data (kept in the model).
    pub fn needs_counts(self) -> bool {
        self == Loss::Hs
    }

    /// The name as the configuration writes it.
    pub fn name(self) -> &'static str {
        match self {
            Loss::Softmax => "softmax",
            Loss::Hs => "hs",
            Loss::Ova => "ova",
        }
    }
}

/// The output layer's structure beyond its table: the tree of `hs`.
#[derive(Debug, Clone)]
pub(crate) enum Head {
    Softmax,
    Hs(Huffman),
    Ova,
}

/// One worker's buffers for the output layer.
#[derive(Debug, Default)]
pub(crate) struct HeadScratch {
    /// Softmax and ova: every class's probability (after [`Head::loss`]).
    pub(crate) probs: Vec<f32>,
    /// Per output row the instance touched: the row and the gradient of the loss on its score.
    pub(crate) grads: Vec<(u32, f32)>,
    /// hs: the scores of the gold label's inner nodes.
    z: Vec<f32>,
}

impl HeadScratch {
    /// The buffers for `classes` classes.
    pub(crate) fn new(classes: usize) -> Self {
        Self {
            probs: vec![0.0; classes],
            ..Self::default()
        }
    }
}

impl Head {
    /// The head of `loss` over labels of `counts` (one per class; only `hs` reads them).
    pub(crate) fn new(loss: Loss, counts: &[u64]) -> Self {
        match loss {
            Loss::Softmax => Head::Softmax,
            Loss::Hs => Head::Hs(Huffman::new(counts)),
            Loss::Ova => Head::Ova,
        }
    }

    /// The loss of an instance of labels `golds` (one, except with ova) and pooled vector `h`,
    /// and whether its most probable class is one of `golds` (equal probabilities counting for
    /// the gold). With `grad_hidden`, also the gradients: per row in `s.grads`, and through the
    /// rows' weights added to `grad_hidden`.
    #[inline]
    pub(crate) fn loss(
        &self,
        fc: &Table,
        h: &[f32],
        golds: &[usize],
        s: &mut HeadScratch,
        mut grad_hidden: Option<&mut [f32]>,
    ) -> (f32, bool) {
        s.grads.clear();
        let backward = grad_hidden.is_some();
        let mut push = |row: usize, g: f32, s: &mut HeadScratch| {
            if let Some(gh) = grad_hidden.as_deref_mut() {
                fc.add_weights_to(row, g, gh);
                s.grads.push((row as u32, g));
            }
        };
        match self {
            Head::Softmax | Head::Ova => {
                let softmax = matches!(self, Head::Softmax);
                let mut max = f32::NEG_INFINITY;
                for (c, p) in s.probs.iter_mut().enumerate() {
                    *p = fc.dot(c, h);
                    max = max.max(*p);
                }
                let mut loss = 0.0;
                if softmax {
                    let mut sum = 0.0;
                    for p in s.probs.iter_mut() {
                        *p = (*p - max).exp();
                        sum += *p;
                    }
                    let inv = 1.0 / sum;
                    s.probs.iter_mut().for_each(|p| *p *= inv);
                    loss = -s.probs[golds[0]].max(1e-30).ln();
                } else {
                    for (c, p) in s.probs.iter_mut().enumerate() {
                        loss += logloss(*p, y(golds, c));
                        *p = sigmoid(*p);
                    }
                }
                let right = golds.contains(&super::bow::argmax(&s.probs));
                if backward {
                    for c in 0..s.probs.len() {
                        let g = s.probs[c] - y(golds, c);
                        push(c, g, s);
                    }
                }
                (loss, right)
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
                let right = !self.beaten(tree, fc, h, gold, &s.z, -loss);
                (loss, right)
            }
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

    /// Every class's probability (in `out`, in class order) after [`Head::loss`] filled
    /// `s.probs` (softmax, ova); hs walks the whole tree.
    pub(crate) fn scores<'a>(
        &'a self,
        fc: &'a Table,
        h: &'a [f32],
        probs: &'a [f32],
    ) -> Scored<'a> {
        match self {
            Head::Softmax | Head::Ova => Scored::Dense(probs),
            Head::Hs(tree) => Scored::Tree { tree, fc, h },
        }
    }

    /// Applies the gradients [`Head::loss`] collected to their rows.
    #[inline]
    pub(crate) fn update<O: Optimizer<f32>>(
        &self,
        fc: &Table,
        opt: &O,
        step: &O::Step,
        h: &[f32],
        s: &HeadScratch,
    ) {
        for &(row, g) in &s.grads {
            fc.update_row(opt, step, row as usize, h, g);
        }
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
    if z > 0.0 {
        above(tree, fc, h, second, b, bound) || above(tree, fc, h, first, a, bound)
    } else {
        above(tree, fc, h, first, a, bound) || above(tree, fc, h, second, b, bound)
    }
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
