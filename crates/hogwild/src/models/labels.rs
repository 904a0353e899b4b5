//! A classifier's labels beyond their ids: their names (kept in its checkpoint), the lines its
//! predictions are written as, and the top-k counts of an evaluation. The formats are fastText's
//! (`predict`, `predict-prob`, `test`, `test-label`), so that its users read the same output:
//!
//! - `predict`: the `k` most probable labels of an instance among those whose probability is at
//!   least the threshold, most probable first (equal probabilities in label order), separated by
//!   spaces: `__label__a __label__b`. An instance with no label at or above the threshold gets an
//!   empty line.
//! - `predict-prob`: each label followed by its probability, `__label__a 0.93 __label__b 0.05`,
//!   written as a C++ stream writes a float by default ([`write_general`]: six significant
//!   digits, no trailing zeros, the exponent form below 1e-4). fastText prints
//!   `exp(log(p + 1e-5))`, the 1e-5 it adds before taking logs included (a certain label prints as
//!   `1.00001`); these are the model's softmax probabilities as they are.
//! - A model whose checkpoint holds no names (one saved before names were stored, or trained
//!   without them) names each label by its id: `2 0.93 0 0.05`.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Mutex;

use super::bow::argmax;
use crate::checkpoint::{Checkpoint, Section};
use crate::metrics::LabelCounts;
use crate::{Error, Result};

/// The checkpoint section holding the label names: UTF-8, one name per line, in id order.
pub const LABELS_SECTION: &str = "labels";

/// Which labels a prediction names: the `k` most probable among those whose probability is at
/// least `threshold` (fastText's `k` and `th`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopK {
    /// At least 1; more than the classes names every class that passes the threshold.
    pub k: usize,
    /// A probability in `[0, 1]`; 0 lets every class pass.
    pub threshold: f32,
}

impl Default for TopK {
    /// fastText's defaults: the most probable label, whatever its probability.
    fn default() -> Self {
        Self {
            k: 1,
            threshold: 0.0,
        }
    }
}

impl TopK {
    /// Fills `out` with the selected `(class, probability)` pairs, most probable first, equal
    /// probabilities in class order. A NaN probability is never selected.
    pub fn select(&self, probs: &[f32], out: &mut Vec<(usize, f32)>) {
        out.clear();
        out.extend(
            probs
                .iter()
                .enumerate()
                .filter(|(_, &p)| p >= self.threshold)
                .map(|(c, &p)| (c, p)),
        );
        let order = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if out.len() > self.k {
            // The k best first, unordered, in linear time; then only they are sorted.
            out.select_nth_unstable_by(self.k - 1, order);
            out.truncate(self.k);
        }
        out.sort_unstable_by(order);
    }
}

/// An instance's class probabilities, for [`Labels`] to write and count: every class's (a
/// softmax's), or a search for the best ones (a hierarchical softmax's, which never computes
/// most of them).
pub(crate) trait Scores {
    /// Every class's probability, in class order, into `out`.
    fn all(&self, out: &mut Vec<f32>);
    /// The classes `top` selects with their probabilities, as [`TopK::select`] orders them.
    fn select(&self, top: TopK, out: &mut Vec<(usize, f32)>);
}

impl Scores for [f32] {
    fn all(&self, out: &mut Vec<f32>) {
        out.clear();
        out.extend_from_slice(self);
    }

    fn select(&self, top: TopK, out: &mut Vec<(usize, f32)>) {
        top.select(self, out);
    }
}

/// How a classifier writes its prediction of an instance (one line each).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum PredictionFormat {
    /// `class<TAB>p0 p1 ...`: the most probable class id, then every class's probability in id
    /// order, with six decimals (a table for scripts; the library's default).
    #[default]
    Table,
    /// fastText's `predict` (`probs: false`) or `predict-prob` (`probs: true`): the labels `top`
    /// selects, by name (see the module documentation).
    Labels {
        /// Which labels are written.
        top: TopK,
        /// Whether each label is followed by its probability.
        probs: bool,
    },
}

/// A classifier's label names, its prediction format and, while an evaluation counts them, the
/// top-k counts of its workers ([`LabelCounts`]).
#[derive(Debug)]
pub struct Labels {
    classes: usize,
    names: Option<Vec<String>>,
    format: PredictionFormat,
    counting: Option<TopK>,
    /// The counts of the workers that have flushed theirs.
    counts: Mutex<LabelCounts>,
}

/// One worker's share of [`Labels`]' work: its selection buffer and its uncounted instances.
#[derive(Debug, Default)]
pub(crate) struct LabelScratch {
    top: Vec<(usize, f32)>,
    all: Vec<f32>,
    counts: LabelCounts,
}

impl Labels {
    /// `classes` labels without names, predictions written as [`PredictionFormat::Table`].
    pub fn new(classes: usize) -> Self {
        Self {
            classes,
            names: None,
            format: PredictionFormat::default(),
            counting: None,
            counts: Mutex::default(),
        }
    }

    /// The labels of a checkpoint's model of `classes` classes: with the names of its
    /// [`LABELS_SECTION`], without names when it has none (a checkpoint saved before names
    /// were stored, or of a model trained without them).
    pub(crate) fn from_checkpoint(ck: &mut Checkpoint, classes: usize) -> Result<Self> {
        let mut labels = Self::new(classes);
        let Some(bytes) = ck.take_section(LABELS_SECTION) else {
            return Ok(labels);
        };
        let bad = |reason: String| Error::Checkpoint {
            path: ck.path.display().to_string(),
            reason: format!("section {LABELS_SECTION}: {reason}"),
        };
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        let names = text.split_terminator('\n').map(str::to_string).collect();
        labels.set_names(names).map_err(|e| match e {
            Error::InvalidConfig { reason, .. } => bad(reason),
            other => other,
        })?;
        Ok(labels)
    }

    /// The number of labels.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// The names in id order, when the model has them.
    pub fn names(&self) -> Option<&[String]> {
        self.names.as_deref()
    }

    /// Names the labels (in id order): one name per class, each distinct, not empty and without
    /// whitespace (predictions separate labels by spaces).
    pub fn set_names(&mut self, names: Vec<String>) -> Result<()> {
        let bad = |reason: String| {
            Err(Error::InvalidConfig {
                field: "labels".into(),
                reason,
            })
        };
        if names.len() != self.classes {
            return bad(format!(
                "{} label names for a model of {} classes",
                names.len(),
                self.classes
            ));
        }
        let mut seen = HashSet::new();
        for (id, name) in names.iter().enumerate() {
            if name.is_empty() || name.contains(char::is_whitespace) {
                return bad(format!(
                    "label {id}: {name:?} is no name (empty, or with whitespace)"
                ));
            }
            if !seen.insert(name.as_str()) {
                return bad(format!("label {id}: {name:?} names an earlier label too"));
            }
        }
        self.names = Some(names);
        Ok(())
    }

    /// How predictions are written.
    pub fn format(&self) -> PredictionFormat {
        self.format
    }

    /// Sets how predictions are written.
    pub fn set_format(&mut self, format: PredictionFormat) {
        self.format = format;
    }

    /// Has evaluations count the labels `top` selects against each instance's label (`None`: no
    /// counting, the default), from no counts.
    pub fn count_top(&mut self, top: Option<TopK>) {
        self.counting = top;
        *self.counts.get_mut().unwrap_or_else(|p| p.into_inner()) = LabelCounts::default();
    }

    /// The counts of every worker that has flushed (after a run: all of them), leaving none.
    pub fn take_counts(&self) -> LabelCounts {
        std::mem::take(&mut *self.counts.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The checkpoint sections that keep the names (none without names).
    pub(crate) fn sections(&self) -> Vec<Section> {
        let Some(names) = &self.names else {
            return Vec::new();
        };
        let mut text = String::new();
        for name in names {
            text.push_str(name);
            text.push('\n');
        }
        vec![Section {
            name: LABELS_SECTION.into(),
            bytes: text.into_bytes(),
        }]
    }

    /// Label `id`'s name (its id without names).
    pub fn name(&self, id: usize) -> String {
        let mut text = String::new();
        self.push_name(&mut text, id);
        text
    }

    /// Appends label `id`'s name (its id without names).
    fn push_name(&self, text: &mut String, id: usize) {
        match &self.names {
            Some(names) => text.push_str(&names[id]),
            None => {
                let _ = write!(text, "{id}");
            }
        }
    }

    /// Appends the prediction line of an instance of class probabilities `scores`.
    pub(crate) fn write<S: Scores + ?Sized>(
        &self,
        s: &mut LabelScratch,
        text: &mut String,
        scores: &S,
    ) {
        match self.format {
            PredictionFormat::Table => {
                scores.all(&mut s.all);
                let probs = &s.all;
                let _ = write!(text, "{}\t", argmax(probs));
                for (c, p) in probs.iter().enumerate() {
                    let sep = if c + 1 == probs.len() { '\n' } else { ' ' };
                    let _ = write!(text, "{p:.6}{sep}");
                }
            }
            PredictionFormat::Labels { top, probs: with } => {
                scores.select(top, &mut s.top);
                for (i, &(c, p)) in s.top.iter().enumerate() {
                    if i > 0 {
                        text.push(' ');
                    }
                    self.push_name(text, c);
                    if with {
                        text.push(' ');
                        write_general(text, f64::from(p), 6);
                    }
                }
                text.push('\n');
            }
        }
    }

    /// Counts an instance of labels `golds` and probabilities `scores` when evaluations count.
    pub(crate) fn count<S: Scores + ?Sized>(
        &self,
        s: &mut LabelScratch,
        golds: &[usize],
        scores: &S,
    ) {
        let Some(top) = self.counting else {
            return;
        };
        scores.select(top, &mut s.top);
        s.counts.log(golds, s.top.iter().map(|&(c, _)| c));
    }

    /// Adds a worker's counts to the model's.
    pub(crate) fn flush(&self, s: &mut LabelScratch) {
        if s.counts.is_empty() {
            return;
        }
        let counts = std::mem::take(&mut s.counts);
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .merge(&counts);
    }
}

/// Appends `x` as C's `%g` (and a C++ stream's default format) writes it with `precision`
/// significant digits: fixed notation with trailing zeros dropped, or `d.ddde-05` when the
/// exponent is below -4 or at least `precision`; `nan` and `inf` as C writes them. fastText
/// writes probabilities so (precision 6) and its `P@k` and `R@k` (precision 3).
pub fn write_general(out: &mut String, x: f64, precision: usize) {
    if x.is_nan() {
        out.push_str("nan");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x < 0.0 { "-inf" } else { "inf" });
        return;
    }
    let p = precision.max(1);
    // The exponent of the number rounded to `p` digits decides the notation (C11 7.21.6.1).
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        out.push_str(trim_zeros(mantissa));
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exp.unsigned_abs());
    } else {
        let fixed = format!("{:.*}", (p as i32 - 1 - exp) as usize, x);
        out.push_str(trim_zeros(&fixed));
    }
}

/// [`write_general`] into a new string.
pub fn format_general(x: f64, precision: usize) -> String {
    let mut s = String::new();
    write_general(&mut s, x, precision);
    s
}

/// `digits` without the trailing zeros of its fraction, nor a bare trailing point.
fn trim_zeros(digits: &str) -> &str {
    if digits.contains('.') {
        digits.trim_end_matches('0').trim_end_matches('.')
    } else {
        digits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // What C's printf("%g", x) and printf("%.3g", x) print (glibc), which `std::cout << x` prints
    // at the default precision 6 and after `setprecision(3)`.
    #[test]
    fn general_format_matches_printf() {
        for (x, six, three) in [
            (0.93, "0.93", "0.93"),
            (1.0, "1", "1"),
            (0.0, "0", "0"),
            (0.8666666666666667, "0.866667", "0.867"),
            (0.123456789, "0.123457", "0.123"),
            (0.000123456, "0.000123456", "0.000123"),
            (1.5e-5, "1.5e-05", "1.5e-05"),
            (2.0e-7, "2e-07", "2e-07"),
            (0.99999999, "1", "1"),
            (0.9996, "0.9996", "1"),
            (123456.0, "123456", "1.23e+05"),
            (1234567.0, "1.23457e+06", "1.23e+06"),
            (f64::NAN, "nan", "nan"),
        ] {
            assert_eq!(format_general(x, 6), six, "%g of {x}");
            assert_eq!(format_general(x, 3), three, "%.3g of {x}");
        }
        // A probability as the model holds it (f32), widened as C++ widens a float to print it.
        assert_eq!(format_general(f64::from(0.93f32), 6), "0.93");
        assert_eq!(format_general(f64::from(0.05f32), 6), "0.05");
    }

    #[test]
    fn top_k_is_most_probable_first_within_the_threshold() {
        let probs = [0.1, 0.4, 0.05, 0.4, 0.05];
        let mut out = Vec::new();
        let top = |k, threshold| TopK { k, threshold };
        top(2, 0.0).select(&probs, &mut out);
        assert_eq!(out, [(1, 0.4), (3, 0.4)], "ties in class order");
        top(10, 0.0).select(&probs, &mut out);
        let order: Vec<usize> = out.iter().map(|x| x.0).collect();
        assert_eq!(order, [1, 3, 0, 2, 4], "k past the classes: every class");
        top(10, 0.1).select(&probs, &mut out);
        assert_eq!(
            out,
            [(1, 0.4), (3, 0.4), (0, 0.1)],
            "at least the threshold"
        );
        top(1, 0.5).select(&probs, &mut out);
        assert!(out.is_empty(), "none reaches 0.5");
        top(1, 0.0).select(&[0.2, f32::NAN, 0.7], &mut out);
        assert_eq!(out, [(2, 0.7)]);
    }

    fn line(labels: &Labels, probs: &[f32]) -> String {
        let mut text = String::new();
        labels.write(&mut LabelScratch::default(), &mut text, probs);
        text
    }

    #[test]
    fn lines_name_labels_or_their_ids() {
        let mut labels = Labels::new(3);
        let probs = [0.05, 0.9, 0.05];
        assert_eq!(line(&labels, &probs), "1\t0.050000 0.900000 0.050000\n");
        let top = TopK {
            k: 2,
            threshold: 0.0,
        };
        labels.set_format(PredictionFormat::Labels { top, probs: true });
        assert_eq!(line(&labels, &probs), "1 0.9 0 0.05\n");
        let names = ["__label__a", "__label__b", "__label__c"].map(String::from);
        labels.set_names(names.to_vec()).unwrap();
        assert_eq!(line(&labels, &probs), "__label__b 0.9 __label__a 0.05\n");
        labels.set_format(PredictionFormat::Labels { top, probs: false });
        assert_eq!(line(&labels, &probs), "__label__b __label__a\n");
        let sure = TopK {
            k: 3,
            threshold: 0.95,
        };
        labels.set_format(PredictionFormat::Labels {
            top: sure,
            probs: true,
        });
        assert_eq!(
            line(&labels, &probs),
            "\n",
            "no label reaches the threshold"
        );
    }

    #[test]
    fn names_must_fit_the_classes() {
        let mut labels = Labels::new(2);
        for (names, want) in [
            (vec!["a"], "1 label names for a model of 2 classes"),
            (vec!["a", "b c"], "label 1: \"b c\" is no name"),
            (vec!["", "b"], "label 0: \"\" is no name"),
            (vec!["a", "a"], "label 1: \"a\" names an earlier label too"),
        ] {
            let names = names.into_iter().map(String::from).collect();
            let e = labels.set_names(names).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
        assert!(labels.names().is_none());
        assert!(labels.sections().is_empty(), "nothing to store");
    }

    fn checkpoint(sections: Vec<Section>) -> Checkpoint {
        Checkpoint {
            path: "model.ckpt".into(),
            meta: String::new(),
            sections,
            tables: Vec::new(),
        }
    }

    #[test]
    fn names_travel_in_a_checkpoint_section() {
        let mut labels = Labels::new(2);
        labels
            .set_names(vec!["__label__no".into(), "__label__yes".into()])
            .unwrap();
        let sections = labels.sections();
        assert_eq!(sections[0].bytes, b"__label__no\n__label__yes\n");
        let back = Labels::from_checkpoint(&mut checkpoint(sections.clone()), 2).unwrap();
        assert_eq!(back.names(), labels.names());
        // A checkpoint without the section (saved before names were kept) loads without names.
        let old = Labels::from_checkpoint(&mut checkpoint(Vec::new()), 2).unwrap();
        assert!(old.names().is_none());
        let e = Labels::from_checkpoint(&mut checkpoint(sections), 3)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "checkpoint model.ckpt: section labels: 2 label names for a model of 3 classes"
        );
    }

    #[test]
    fn counts_are_kept_per_worker_until_flushed() {
        let mut labels = Labels::new(3);
        let mut s = LabelScratch::default();
        labels.count(&mut s, &[0], &[0.7, 0.2, 0.1][..]);
        assert!(s.counts.is_empty(), "nothing counted unless asked");
        labels.count_top(Some(TopK {
            k: 2,
            threshold: 0.0,
        }));
        labels.count(&mut s, &[0], &[0.7, 0.2, 0.1][..]);
        labels.count(&mut s, &[2], &[0.7, 0.2, 0.1][..]);
        assert!(labels.take_counts().is_empty(), "not flushed yet");
        labels.flush(&mut s);
        let c = labels.take_counts();
        assert_eq!(c.examples(), 2);
        assert_eq!(
            (c.total().correct, c.total().predicted, c.total().gold),
            (1, 4, 2)
        );
        assert!(labels.take_counts().is_empty(), "taken");
    }
}
