//! Metrics that cannot be averaged over batches: the exact area under the ROC curve (AUC) of a
//! binary task, from every instance's (score, label) pair.
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
