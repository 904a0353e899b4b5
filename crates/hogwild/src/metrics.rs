//! Metrics that cannot be averaged over batches: the exact area under the ROC curve (AUC) of a
//! binary task, from every instance's (score, label) pair, and the precision and recall of a
//! classifier's top-k predictions ([`LabelCounts`], fastText's `test` and `test-label`).
//!
//! Each worker thread collects its own pairs in an [`Auc`]; the executor merges them at the end of a
//! run (or an epoch) and computes the value once, so the result is the AUC of the whole data set,
//! not a mean of per-batch AUCs. Ties count one half (the Mann-Whitney statistic, which is what
//! `sklearn.metrics.roc_auc_score` returns).
//!
//! ```
//! use hogwild::metrics::Auc;
//!
//! let mut a = Auc::default();
//! let mut b = Auc::default();
//! a.push(0.1, false);
//! a.push(0.4, false);
//! b.push(0.35, true);
//! b.push(0.8, true);
//! a.merge(b);
//! assert_eq!(a.value().unwrap(), 0.75);
//! ```

use crate::{Error, Result};

/// (score, label) pairs of a binary task, gathered per thread and merged; see the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Auc {
    pairs: Vec<(f32, bool)>,
}

impl Auc {
    /// Records one instance: the model's score (any monotone score: probability or logit) and
    /// whether its label is positive.
    #[inline]
    pub fn push(&mut self, score: f32, positive: bool) {
        self.pairs.push((score, positive));
    }

    /// Adds another thread's pairs.
    pub fn merge(&mut self, other: Auc) {
        if self.pairs.is_empty() {
            self.pairs = other.pairs;
        } else {
            self.pairs.extend_from_slice(&other.pairs);
        }
    }

    /// Number of pairs held.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair is held.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Forgets every pair (keeps the allocation).
    pub fn clear(&mut self) {
        self.pairs.clear();
    }

    /// The exact AUC: the probability that a random positive scores above a random negative, ties
    /// counting one half. Sorts the pairs in place, O(n log n). Fails when there is no positive or
    /// no negative, or when a score is NaN (naming its position among the pairs).
    pub fn value(&mut self) -> Result<f64> {
        if let Some(at) = self.pairs.iter().position(|p| p.0.is_nan()) {
            return Err(Error::Metric {
                name: "auc",
                reason: format!("score of instance {at} is NaN"),
            });
        }
        let positives = self.pairs.iter().filter(|p| p.1).count();
        let negatives = self.pairs.len() - positives;
        if positives == 0 || negatives == 0 {
            return Err(Error::Metric {
                name: "auc",
                reason: format!(
                    "needs both classes, got {positives} positive and {negatives} negative instances"
                ),
            });
        }
        self.pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        // Walk groups of equal scores in ascending order: each positive of a group beats every
        // negative below the group and ties with the group's negatives.
        let (mut wins, mut below, mut i) = (0.0f64, 0u64, 0);
        while i < self.pairs.len() {
            let score = self.pairs[i].0;
            let (mut pos, mut neg) = (0u64, 0u64);
            while i < self.pairs.len() && self.pairs[i].0 == score {
                if self.pairs[i].1 {
                    pos += 1;
                } else {
                    neg += 1;
                }
                i += 1;
            }
            wins += pos as f64 * (below as f64 + 0.5 * neg as f64);
            below += neg;
        }
        Ok(wins / (positives as f64 * negatives as f64))
    }
}

/// Counts behind precision and recall, of one label or of all labels together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Gold labels: instances labelled with it (all labels: every instance's labels).
    pub gold: u64,
    /// Predictions of it.
    pub predicted: u64,
    /// Predictions of it that are among the instance's gold labels.
    pub correct: u64,
}

impl Counts {
    /// Correct predictions over predictions; NaN without a prediction.
    pub fn precision(&self) -> f64 {
        ratio(self.correct, self.predicted)
    }

    /// Correct predictions over gold labels; NaN without a gold label.
    pub fn recall(&self) -> f64 {
        ratio(self.correct, self.gold)
    }

    /// The harmonic mean of precision and recall, `2 correct / (predicted + gold)` (0 when there
    /// are predictions or gold labels but none correct); NaN with neither.
    pub fn f1(&self) -> f64 {
        ratio(2 * self.correct, self.predicted + self.gold)
    }

    fn add(&mut self, other: &Counts) {
        self.gold += other.gold;
        self.predicted += other.predicted;
        self.correct += other.correct;
    }
}

/// `n / d`, NaN for `d = 0` (a quiet NaN of positive sign, as fastText's: printed as `nan`).
fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        f64::NAN
    } else {
        n as f64 / d as f64
    }
}

/// What a classifier predicted against the gold labels, per label and in total, over every
/// instance evaluated (fastText's `Meter`): precision at k is the share of the predicted labels
/// that are gold labels, recall at k the share of the gold labels that were predicted. Each
/// worker thread counts its own instances; the counts are merged at the end.
///
/// ```
/// use hogwild::metrics::LabelCounts;
///
/// let mut c = LabelCounts::default();
/// c.log(&[0], [0, 2]); // gold label 0; predicted 0 (right) and 2 (wrong)
/// c.log(&[1], [2]);
/// assert_eq!(c.examples(), 2);
/// assert_eq!(c.total().precision(), 1.0 / 3.0); // 1 of 3 predictions
/// assert_eq!(c.total().recall(), 0.5); // 1 of 2 gold labels
/// assert_eq!(c.label(2).precision(), 0.0);
/// assert!(c.label(1).precision().is_nan()); // never predicted
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelCounts {
    examples: u64,
    total: Counts,
    /// Indexed by label id; grown to the largest id seen.
    labels: Vec<Counts>,
}

impl LabelCounts {
    /// Records one instance: its gold labels and the labels predicted for it (each at most once).
    pub fn log(&mut self, gold: &[usize], predicted: impl IntoIterator<Item = usize>) {
        self.examples += 1;
        for &g in gold {
            self.at(g).gold += 1;
            self.total.gold += 1;
        }
        for p in predicted {
            let right = gold.contains(&p);
            let c = self.at(p);
            c.predicted += 1;
            c.correct += u64::from(right);
            self.total.predicted += 1;
            self.total.correct += u64::from(right);
        }
    }

    fn at(&mut self, label: usize) -> &mut Counts {
        if label >= self.labels.len() {
            self.labels.resize(label + 1, Counts::default());
        }
        &mut self.labels[label]
    }

    /// Adds another thread's counts.
    pub fn merge(&mut self, other: &LabelCounts) {
        self.examples += other.examples;
        self.total.add(&other.total);
        for (label, c) in other.labels.iter().enumerate() {
            self.at(label).add(c);
        }
    }

    /// Instances recorded.
    pub fn examples(&self) -> u64 {
        self.examples
    }

    /// Whether no instance is recorded.
    pub fn is_empty(&self) -> bool {
        self.examples == 0
    }

    /// The counts over all labels (precision and recall at k).
    pub fn total(&self) -> Counts {
        self.total
    }

    /// The counts of label `id` (zero for a label never seen or predicted).
    pub fn label(&self, id: usize) -> Counts {
        self.labels.get(id).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn auc(scores: &[f32], labels: &[u8]) -> Result<f64> {
        let mut a = Auc::default();
        for (&s, &y) in scores.iter().zip(labels) {
            a.push(s, y == 1);
        }
        a.value()
    }

    // Expected values from the rank-sum formula in numpy (what sklearn's roc_auc_score computes):
    //   def auc(s, y):
    //       s = np.asarray(s, np.float64); y = np.asarray(y, bool)
    //       order = np.argsort(s, kind="mergesort"); ss = s[order]; ranks = np.empty(len(s)); i = 0
    //       while i < len(s):
    //           j = i
    //           while j + 1 < len(s) and ss[j + 1] == ss[i]: j += 1
    //           ranks[order[i:j + 1]] = (i + j) / 2 + 1; i = j + 1
    //       P = y.sum(); N = len(y) - P
    //       return (ranks[y].sum() - P * (P + 1) / 2) / (P * N)
    //   auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])            -> 0.75 (sklearn's docs example)
    //   auc([0.5, 0.5, 0.5, 0.9, 0.1], [1, 0, 1, 1, 0])     -> 0.8333333333333334
    //   auc([0.2, 0.2, 0.2, 0.2], [1, 0, 1, 0])             -> 0.5
    //   auc([0.9, 0.8, 0.7, 0.6, 0.55, 0.54, 0.53, 0.52, 0.51, 0.505],
    //       [1, 1, 0, 1, 1, 1, 0, 0, 1, 0])                 -> 0.75
    #[test]
    fn matches_the_rank_sum_formula_with_ties() {
        assert_relative_eq!(auc(&[0.1, 0.4, 0.35, 0.8], &[0, 0, 1, 1]).unwrap(), 0.75);
        assert_relative_eq!(
            auc(&[0.5, 0.5, 0.5, 0.9, 0.1], &[1, 0, 1, 1, 0]).unwrap(),
            0.8333333333333334,
            epsilon = 1e-12
        );
        assert_relative_eq!(auc(&[0.2; 4], &[1, 0, 1, 0]).unwrap(), 0.5);
        assert_relative_eq!(
            auc(
                &[0.9, 0.8, 0.7, 0.6, 0.55, 0.54, 0.53, 0.52, 0.51, 0.505],
                &[1, 1, 0, 1, 1, 1, 0, 0, 1, 0]
            )
            .unwrap(),
            0.75
        );
    }

    /// Merging per-thread pairs gives the AUC of the whole set, equal to the pairwise count
    /// (every positive against every negative, ties one half) on random data with many ties.
    #[test]
    fn merged_threads_equal_the_pairwise_definition() {
        let mut s = 0x1234_5678_9ABC_DEF0u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let pairs: Vec<(f32, bool)> = (0..600)
            .map(|_| {
                let r = next();
                let positive = r % 3 == 0;
                // Scores on a grid of 50 values (many ties), shifted up for positives.
                let score = ((r >> 8) % 50) as f32 / 50.0 + if positive { 0.2 } else { 0.0 };
                (score, positive)
            })
            .collect();
        let (mut wins, mut n) = (0.0f64, 0.0f64);
        for p in pairs.iter().filter(|p| p.1) {
            for q in pairs.iter().filter(|q| !q.1) {
                n += 1.0;
                wins += if p.0 > q.0 {
                    1.0
                } else if p.0 == q.0 {
                    0.5
                } else {
                    0.0
                };
            }
        }
        let mut threads = [Auc::default(), Auc::default(), Auc::default()];
        for (i, &(score, positive)) in pairs.iter().enumerate() {
            threads[i % 3].push(score, positive);
        }
        let mut all = Auc::default();
        for t in threads {
            all.merge(t);
        }
        assert_eq!(all.len(), 600);
        assert_relative_eq!(all.value().unwrap(), wins / n, epsilon = 1e-12);
    }

    // Hand-computed: 3 labels, two predictions per instance (k = 2).
    //   gold 0, predicted 0 1: 1 right    gold 1, predicted 0 2: 0 right
    //   gold 2, predicted 2 1: 1 right    gold 0, predicted 1 0: 1 right
    // All labels: 3 right of 8 predictions (P@2 = 0.375) and of 4 gold labels (R@2 = 0.75).
    // Label 0: gold 2, predicted 3, right 2: P 2/3, R 1, F1 2*2/(3+2) = 0.8.
    // Label 1: gold 1, predicted 3, right 0: P 0, R 0, F1 0.
    // Label 2: gold 1, predicted 2, right 1: P 1/2, R 1, F1 2/3.
    fn logged(instances: &[(usize, [usize; 2])]) -> LabelCounts {
        let mut c = LabelCounts::default();
        for (gold, predicted) in instances {
            c.log(&[*gold], predicted.iter().copied());
        }
        c
    }

    const HAND: [(usize, [usize; 2]); 4] = [(0, [0, 1]), (1, [0, 2]), (2, [2, 1]), (0, [1, 0])];

    #[test]
    fn precision_and_recall_at_k_match_hand_counts() {
        let c = logged(&HAND);
        assert_eq!(c.examples(), 4);
        let t = c.total();
        assert_eq!((t.gold, t.predicted, t.correct), (4, 8, 3));
        assert_relative_eq!(t.precision(), 0.375);
        assert_relative_eq!(t.recall(), 0.75);
        let per: Vec<(f64, f64, f64)> = (0..3)
            .map(|l| (c.label(l).precision(), c.label(l).recall(), c.label(l).f1()))
            .collect();
        assert_relative_eq!(per[0].0, 2.0 / 3.0);
        assert_relative_eq!(per[0].1, 1.0);
        assert_relative_eq!(per[0].2, 0.8);
        assert_eq!(per[1], (0.0, 0.0, 0.0));
        assert_relative_eq!(per[2].0, 0.5);
        assert_relative_eq!(per[2].1, 1.0);
        assert_relative_eq!(per[2].2, 2.0 / 3.0);
        // F1 is the harmonic mean of precision and recall where both exist.
        for (p, r, f1) in &per[..] {
            if p + r > 0.0 {
                assert_relative_eq!(*f1, 2.0 * p * r / (p + r), epsilon = 1e-12);
            }
        }
        // A label neither seen nor predicted has no precision, recall or F1; one never predicted
        // has no precision but a recall of 0.
        assert_eq!(c.label(3), Counts::default());
        assert!(c.label(3).precision().is_nan() && c.label(3).f1().is_nan());
        let mut missed = LabelCounts::default();
        missed.log(&[4], []);
        let m = missed.label(4);
        assert!(m.precision().is_nan());
        assert_eq!((m.recall(), m.f1()), (0.0, 0.0));
        assert!(missed.total().precision().is_nan(), "no prediction at all");
    }

    #[test]
    fn merged_threads_count_as_one() {
        let mut a = logged(&HAND[..1]);
        let b = logged(&HAND[1..]);
        a.merge(&b);
        assert_eq!(a, logged(&HAND));
        let mut empty = LabelCounts::default();
        assert!(empty.is_empty());
        empty.merge(&a);
        assert_eq!(empty, a);
    }

    #[test]
    fn one_class_empty_and_nan_are_errors() {
        let e = auc(&[0.1, 0.2], &[1, 1]).unwrap_err().to_string();
        assert_eq!(
            e,
            "metric auc: needs both classes, got 2 positive and 0 negative instances"
        );
        let e = auc(&[], &[]).unwrap_err().to_string();
        assert!(e.contains("got 0 positive and 0 negative"), "{e}");
        let e = auc(&[0.1, f32::NAN, 0.3], &[1, 0, 0])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "metric auc: score of instance 1 is NaN");
        let mut a = Auc::default();
        a.push(1.0, true);
        a.clear();
        assert!(a.is_empty());
    }
}
