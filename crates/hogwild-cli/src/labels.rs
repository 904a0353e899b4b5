//! Labels of the bag-of-words classifier on the command line: `-k` and `--threshold` of
//! `predict` and `eval` (fastText's `k` and `th`), the label names `train --labels` keeps in the
//! model, and the fastText formats of `eval`'s top-k metrics (`test`, `test-label`).

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args as ClapArgs;
use hogwild::metrics::{Counts, LabelCounts};
use hogwild::models::{format_general, Labels, ModelConfig, ModelKind, TopK};
use hogwild::tools::convert::Vocabulary;

use crate::paths;

/// `-k` and `--threshold`.
#[derive(ClapArgs, Debug, Clone)]
pub struct TopArgs {
    /// Bag-of-words models: the N most probable labels of each instance (fastText's k;
    /// default 1), which `predict` writes and `eval` measures (fastText's N, P@k and R@k).
    #[arg(short = 'k', value_name = "N", value_parser = parse_k)]
    pub k: Option<usize>,
    /// Bag-of-words models: only labels of probability at least P, from 0 to 1 (fastText's
    /// threshold; default 0). An instance may then have fewer than k labels, or none.
    #[arg(long, value_name = "P", value_parser = parse_threshold)]
    pub threshold: Option<f32>,
}

impl TopArgs {
    /// Whether either option is given.
    pub fn given(&self) -> bool {
        self.k.is_some() || self.threshold.is_some()
    }

    /// The labels to select: fastText's defaults for what is not given.
    pub fn top(&self) -> TopK {
        let default = TopK::default();
        TopK {
            k: self.k.unwrap_or(default.k),
            threshold: self.threshold.unwrap_or(default.threshold),
        }
    }
}

/// `-k`: 1 or more.
pub fn parse_k(text: &str) -> std::result::Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 labels predict nothing: give 1 or more".into()),
        Ok(k) => Ok(k),
        Err(e) => Err(format!("\"{text}\" is not a number of labels: {e}")),
    }
}

/// `--threshold`: a probability, from 0 to 1.
pub fn parse_threshold(text: &str) -> std::result::Result<f32, String> {
    match text.trim().parse::<f32>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        Ok(p) => Err(format!("{p} is not a probability: give 0 to 1")),
        Err(e) => Err(format!("\"{text}\" is not a number: {e}")),
    }
}

/// The error for `options` (e.g. "-k and --threshold") given with a model other than the
/// bag-of-words classifier, the only one with labels: names the options and the model.
pub fn not_bow(config: &ModelConfig, path: &Path, options: &str) -> anyhow::Error {
    anyhow!(
        "{options} apply to bag-of-words models (kind = \"bow\"); {} holds a {} model",
        path.display(),
        kind_name(&config.model)
    )
}

/// A note, when a model has no label names, that its labels are written as ids.
pub fn note_unnamed(labels: &Labels, path: &Path) {
    if labels.names().is_none() {
        eprintln!(
            "note: {} holds no label names (trained without --labels, or saved by an older \
             hogwild): labels are written as their ids",
            path.display()
        );
    }
}

fn kind_name(kind: &ModelKind) -> &'static str {
    match kind {
        ModelKind::Bow(_) => "bow",
        ModelKind::Word2vec(_) => "word2vec",
        ModelKind::Lr(_) => "lr",
        ModelKind::Fm(_) => "fm",
        ModelKind::Ffm(_) => "ffm",
    }
}

/// What `train --labels FILE` reads from the `label` lines of a vocabulary `hogwild convert
/// --from fasttext` wrote, one per class of a bag-of-words model.
pub struct LabelFile {
    pub names: Vec<String>,
    /// How often each label occurs in the training data (`None`: a vocabulary written before
    /// counts were kept).
    pub counts: Option<Vec<u64>>,
}

/// The labels of `train --labels FILE` for a model of `config`.
pub fn read_labels(path: &Path, config: &ModelConfig) -> Result<LabelFile> {
    let ModelKind::Bow(bow) = &config.model else {
        bail!(
            "--labels names the labels of bag-of-words models (kind = \"bow\"); this is a {} \
             model",
            kind_name(&config.model)
        );
    };
    paths::check_inputs("--labels file", [path])?;
    let vocab = Vocabulary::load(path).with_context(|| format!("--labels {}", path.display()))?;
    let names = vocab.label_names().to_vec();
    if names.len() == bow.classes {
        // The names themselves, checked as the model will check them.
        Labels::new(bow.classes)
            .set_names(names.clone())
            .with_context(|| format!("--labels {}", path.display()))?;
    } else {
        bail!(
            "--labels {}: {} labels for a model of classes = {} (the label lines of the \
             vocabulary `hogwild convert --from fasttext --build-vocab` wrote for the training \
             data)",
            path.display(),
            names.len(),
            bow.classes
        );
    }
    Ok(LabelFile {
        names,
        counts: vocab.label_counts().map(<[u64]>::to_vec),
    })
}

/// The label counts a new model of `config` needs (`loss = "hs"` builds its tree of them,
/// `loss = "ns"` draws its negative labels by them):
/// those of `--labels`, refused before any data is read when they are missing. `Ok(None)` when
/// the model needs none.
pub fn counts_for_new(
    config: &ModelConfig,
    labels: Option<(&Path, &LabelFile)>,
) -> Result<Option<Vec<u64>>> {
    let ModelKind::Bow(bow) = &config.model else {
        return Ok(None);
    };
    if !bow.loss.needs_counts() {
        return Ok(None);
    }
    let (loss, does) = (bow.loss.name(), bow.loss.counts_use());
    match labels {
        Some((
            _,
            LabelFile {
                counts: Some(c), ..
            },
        )) => Ok(Some(c.clone())),
        Some((path, _)) => bail!(
            "loss = \"{loss}\" {does} from the labels' counts, and --labels {} has \
             none (a vocabulary written by an older hogwild): build it again with `hogwild \
             convert --from fasttext --build-vocab --vocab FILE` on the training data",
            path.display()
        ),
        None => bail!(
            "loss = \"{loss}\" {does} from the labels' counts in the training data: \
             give --labels FILE, the vocabulary `hogwild convert --from fasttext --build-vocab \
             --vocab FILE` wrote for it"
        ),
    }
}

/// fastText's `test` lines: `N`, `P@k` and `R@k`, tab-separated. The precision and recall are
/// written with three significant digits (`%.3g`), or, after per-label lines, with three decimals:
/// fastText's `test-label` sets its stream to fixed notation for those lines, and its `P@k` and
/// `R@k` inherit it.
pub fn general_metrics(counts: &LabelCounts, k: usize, after_labels: bool) -> String {
    let value = |x: f64| match (after_labels, x.is_nan()) {
        (true, false) => format!("{x:.3}"),
        (true, true) => "nan".to_string(),
        (false, _) => format_general(x, 3),
    };
    let total = counts.total();
    format!(
        "N\t{}\nP@{k}\t{}\nR@{k}\t{}",
        counts.examples(),
        value(total.precision()),
        value(total.recall())
    )
}

/// fastText's `test-label` line of one label: F1, precision and recall with six decimals (or
/// `--------` where undefined: no prediction, no gold label), then the label's name.
pub fn label_line(name: &str, c: &Counts) -> String {
    let value = |x: f64| {
        if x.is_finite() {
            format!("{x:.6}")
        } else {
            "--------".to_string()
        }
    };
    format!(
        "F1-Score : {}  Precision : {}  Recall : {}   {name}",
        value(c.f1()),
        value(c.precision()),
        value(c.recall())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_refused_with_the_reason() {
        assert_eq!(parse_k("5"), Ok(5));
        assert!(parse_k("0").unwrap_err().contains("1 or more"));
        assert!(parse_k("-1").unwrap_err().contains("\"-1\""));
        assert_eq!(parse_threshold("0.5"), Ok(0.5));
        assert_eq!(parse_threshold("1"), Ok(1.0));
        assert_eq!(parse_threshold("0"), Ok(0.0));
        for bad in ["1.5", "-0.1", "NaN", "inf"] {
            let e = parse_threshold(bad).unwrap_err();
            assert!(e.contains("not a probability"), "{bad}: {e}");
        }
        assert!(parse_threshold("half").unwrap_err().contains("\"half\""));
    }

    // The hand-counted case of `hogwild::metrics` (P@2 = 3/8, R@2 = 3/4; label 0: P 2/3, R 1,
    // F1 0.8; label 1 all 0; label 2: P 1/2, R 1, F1 2/3), as fastText's `test` and `test-label`
    // print such numbers.
    #[test]
    fn metrics_read_as_fasttext_writes_them() {
        let mut c = LabelCounts::default();
        for (gold, predicted) in [(0, [0, 1]), (1, [0, 2]), (2, [2, 1]), (0, [1, 0])] {
            c.log(&[gold], predicted);
        }
        assert_eq!(general_metrics(&c, 2, false), "N\t4\nP@2\t0.375\nR@2\t0.75");
        assert_eq!(general_metrics(&c, 2, true), "N\t4\nP@2\t0.375\nR@2\t0.750");
        assert_eq!(
            label_line("__label__a", &c.label(0)),
            "F1-Score : 0.800000  Precision : 0.666667  Recall : 1.000000   __label__a"
        );
        assert_eq!(
            label_line("__label__b", &c.label(1)),
            "F1-Score : 0.000000  Precision : 0.000000  Recall : 0.000000   __label__b"
        );
        assert_eq!(
            label_line("2", &c.label(2)),
            "F1-Score : 0.666667  Precision : 0.500000  Recall : 1.000000   2"
        );
        assert_eq!(
            label_line("__label__d", &c.label(3)),
            "F1-Score : --------  Precision : --------  Recall : --------   __label__d"
        );
        // No prediction at all (a threshold none reaches): no precision.
        let mut none = LabelCounts::default();
        none.log(&[0], []);
        assert_eq!(general_metrics(&none, 1, false), "N\t1\nP@1\tnan\nR@1\t0");
        assert_eq!(
            general_metrics(&none, 1, true),
            "N\t1\nP@1\tnan\nR@1\t0.000"
        );
    }
}
