//! `hogwild demo`: generates a small text-classification corpus, trains the bag-of-words model on
//! every core with AdamAsync, and prints progress and the final train and test metrics.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use hogwild::executor::{self, EpochReport, Progress, Run, RunOptions};
use hogwild::feed::{DataFeedDesc, FeedMode, InMemoryDataset};
use hogwild::models::{BowConfig, Loss, LrSchedule, ModelConfig, ModelKind, OptimizerConfig, Pool};
use hogwild::rng::{unit_f64, XorShift64Star};

use crate::models::{default_threads, AnyModel};
use crate::with_model;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Worker threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Passes over the training files.
    #[arg(long, default_value_t = 5)]
    pub epochs: usize,
    /// Write the corpus and the model here and keep them (default: a temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

const VOCAB: u64 = 2_000;
const CLASSES: u64 = 4;
const TOPIC_WORDS: u64 = 100;
const TRAIN_DOCS: usize = 80_000;
const TEST_DOCS: usize = 20_000;
const TRAIN_PARTS: usize = 8;

const DESC: &str = r#"name: "MultiSlotDataFeed"
batch_size: 64
multi_slot_desc {
  slots { name: "words" type: "uint64" is_dense: false is_used: true }
  slots { name: "label" type: "uint64" is_dense: false is_used: true }
}
"#;

/// One document in MultiSlot format. Each class owns `TOPIC_WORDS` ids; a word is one of its
/// class's topic words with probability 0.12, otherwise a background word with Zipf-like
/// frequencies shared by all classes; 3 % of labels are flipped, so accuracy stays below 100 %.
/// Words are drawn independently (bigrams carry no signal, so the model uses none), and the corpus
/// is large for its small vocabulary, so the model cannot memorise documents: train and test
/// accuracy stay within about a point.
fn document(rng: &mut XorShift64Star, out: &mut String) {
    let class = rng.next() % CLASSES;
    let len = 20 + rng.next() % 41;
    let _ = write!(out, "{len}");
    for _ in 0..len {
        let id = if unit_f64(rng.next()) < 0.12 {
            class * TOPIC_WORDS + rng.next() % TOPIC_WORDS
        } else {
            let background = VOCAB - CLASSES * TOPIC_WORDS;
            let z = (background as f64).powf(unit_f64(rng.next())) as u64 - 1;
            CLASSES * TOPIC_WORDS + z.min(background - 1)
        };
        let _ = write!(out, " {id}");
    }
    let label = if unit_f64(rng.next()) < 0.03 {
        rng.next() % CLASSES
    } else {
        class
    };
    let _ = writeln!(out, " 1 {label}");
}

/// Writes the corpus: `TRAIN_PARTS` training files and one test file.
fn write_corpus(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    // A fixed generator state (not a seed run through `from_seed`), so every run trains on the
    // same corpus.
    let mut rng = XorShift64Star(0x5EED_1234_ABCD_0001);
    let mut train = Vec::new();
    for part in 0..TRAIN_PARTS {
        let mut text = String::new();
        for _ in 0..TRAIN_DOCS / TRAIN_PARTS {
            document(&mut rng, &mut text);
        }
        let path = dir.join(format!("train-{part:02}.txt"));
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        train.push(path);
    }
    let mut text = String::new();
    for _ in 0..TEST_DOCS {
        document(&mut rng, &mut text);
    }
    let test = dir.join("test.txt");
    std::fs::write(&test, text).with_context(|| format!("cannot write {}", test.display()))?;
    Ok((train, vec![test]))
}

pub fn run(args: Args) -> Result<()> {
    let temp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.clone()
        }
        None => {
            temp = tempfile::tempdir().context("cannot create a temporary directory")?;
            temp.path().to_path_buf()
        }
    };
    let (train, test) = write_corpus(&dir)?;
    std::fs::write(dir.join("data.prototxt"), DESC)?;
    let desc = DataFeedDesc::from_text(DESC)?;
    let config = ModelConfig {
        model: ModelKind::Bow(BowConfig {
            words_slot: "words".into(),
            label_slot: "label".into(),
            vocab: VOCAB as usize,
            classes: CLASSES as usize,
            loss: Loss::Softmax,
            negative: 5,
            dim: 10,
            bigram_buckets: 0,
            subword_buckets: 0,
            pool: Pool::Mean,
            end_of_text: true,
            bias: false,
            lr_schedule: LrSchedule::Linear,
            lr_hold: 0.25,
            seed: 1,
        }),
        optimizer: OptimizerConfig::AdamAsync {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            rmsprop: false,
            nesterov: false,
        },
    };
    std::fs::write(dir.join("model.toml"), config.to_toml())?;
    let threads = args.threads.unwrap_or_else(default_threads);
    println!(
        "hogwild demo: {TRAIN_DOCS} training and {TEST_DOCS} test documents, {CLASSES} classes, \
         vocabulary {VOCAB}, in {}",
        place(args.dir.as_deref())
    );
    println!(
        "bag of words, dim 10, AdamAsync lr 0.01, {threads} threads, {} epochs, data loaded once",
        args.epochs
    );
    let mut options = RunOptions {
        print_period: TRAIN_DOCS / 64 / 2,
        progress: Progress::Auto,
        ..RunOptions::default()
    };
    options.feed.threads = threads;
    options.feed.epochs = args.epochs;
    options.feed.mode = FeedMode::InMemory { shuffle: Some(1) };
    let data = InMemoryDataset::load(&desc, &train, &options.feed)?;
    let model = AnyModel::new(&config, None)?;
    with_model!(&model, m => executor::startup(m));
    let print = |e: &EpochReport| {
        println!(
            "epoch {}: loss {:.4}  accuracy {:.4}  ({:.2}s)",
            e.epoch,
            e.get("loss").unwrap_or(f64::NAN),
            e.get("accuracy").unwrap_or(f64::NAN),
            e.elapsed.as_secs_f64()
        );
        Ok(())
    };
    let r = with_model!(&model, m =>
        Run::new(m, &desc).threads(threads).options(&options).on_epoch(&print).train_dataset(&data))?;
    println!(
        "trained {} documents/s on {threads} threads",
        r.instances_per_sec().round()
    );
    let quiet = RunOptions {
        progress: Progress::Quiet,
        print_period: 0,
        ..RunOptions::default()
    };
    let saved = dir.join("model.ckpt");
    model.save(&saved, args.epochs)?;
    let (_, reloaded) = crate::models::load(&saved)?;
    for (name, files) in [("train", &train), ("test", &test)] {
        let r = with_model!(&reloaded, m =>
            Run::new(m, &desc).threads(threads).options(&quiet).eval(files))?;
        println!(
            "{name}: {} documents  loss {:.4}  accuracy {:.4}",
            r.instances,
            r.get("loss").unwrap_or(f64::NAN),
            r.get("accuracy").unwrap_or(f64::NAN)
        );
    }
    println!(
        "{}",
        saved_line(args.dir.is_some(), &saved, model.memory_bytes())
    );
    Ok(())
}

// Without --dir the files go with the temporary directory at exit: the demo names no path that
// will not exist once it ends.

/// Where the demo writes its files, for its first line.
fn place(dir: Option<&Path>) -> String {
    match dir {
        Some(d) => d.display().to_string(),
        None => "a temporary directory (removed at exit; --dir DIR keeps the files)".to_string(),
    }
}

/// The last line: the checkpoint's path only when it is kept (`kept`: --dir was given).
fn saved_line(kept: bool, saved: &Path, memory_bytes: usize) -> String {
    let kib = memory_bytes / 1024;
    if kept {
        format!(
            "model saved to {} and reloaded ({kib} KiB of parameters and optimizer state)",
            saved.display()
        )
    } else {
        format!(
            "model saved and reloaded ({kib} KiB of parameters and optimizer state; removed with \
             the temporary directory: --dir DIR keeps it)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_directory_is_never_named() {
        let temp = Path::new("/tmp/.tmpXYZ/model.ckpt");
        assert!(!place(None).contains('/'), "{}", place(None));
        let line = saved_line(false, temp, 4096);
        assert!(!line.contains("/tmp"), "{line}");
        assert!(line.contains("--dir DIR keeps it"), "{line}");
    }

    #[test]
    fn a_kept_directory_and_checkpoint_are_named() {
        assert_eq!(place(Some(Path::new("demo"))), "demo");
        let line = saved_line(true, Path::new("demo/model.ckpt"), 4096);
        assert!(
            line.starts_with("model saved to demo/model.ckpt and reloaded (4 KiB"),
            "{line}"
        );
    }
}
