//! `hogwild convert`: turns fastText, libsvm, libffm, Vowpal Wabbit or CSV text into MultiSlot
//! lines and writes the matching data.prototxt; for libsvm, libffm and VW it prints the
//! `[model]` keys with which the CTR models read the values, field numbers and weights.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hogwild::tools::convert::{
    convert_csv, convert_fasttext, convert_libsvm, convert_vw, fasttext_desc, libsvm_ctr_keys,
    libsvm_desc, vw_ctr_keys, vw_desc, CsvOptions, FastTextOptions, Vocabulary, WordIds,
};

/// Input formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `__label__x some text` (fastText supervised input).
    Fasttext,
    /// `label index:value ...`.
    Libsvm,
    /// `label field:index:value ...`.
    Libffm,
    /// `label [importance] [tag]|namespace feature[:value] ...` (Vowpal Wabbit).
    Vw,
    /// Comma-separated with a header row; categorical columns are hashed.
    Csv,
}

/// Arguments of `hogwild convert`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input format.
    #[arg(long)]
    pub from: Format,
    /// Input file.
    pub input: PathBuf,
    /// Output MultiSlot file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Where to write the matching data.prototxt (default: data.prototxt next to the output).
    #[arg(long)]
    pub prototxt: Option<PathBuf>,
    /// Batch size written into the prototxt.
    #[arg(long, default_value_t = 32)]
    pub batch_size: i32,
    /// fastText: vocabulary file. Read (for test data, so ids match the training data) unless
    /// --build-vocab is given; then built from the input and written here.
    #[arg(long)]
    pub vocab: Option<PathBuf>,
    /// fastText: build the vocabulary from this input and save it to --vocab.
    #[arg(long)]
    pub build_vocab: bool,
    /// fastText: hash words into this many buckets instead of using a vocabulary (labels still
    /// use one). VW and CSV: feature id buckets.
    #[arg(long)]
    pub buckets: Option<u64>,
    /// fastText: add hashed word bigrams in this many buckets (fastText's -wordNgrams 2).
    #[arg(long)]
    pub bigram_buckets: Option<u64>,
    /// CSV: the label column.
    #[arg(long, default_value = "label")]
    pub label_column: String,
    /// CSV: feature columns, comma-separated (default: all but the label).
    #[arg(long, value_delimiter = ',')]
    pub columns: Option<Vec<String>>,
    /// CSV: field delimiter.
    #[arg(long, default_value_t = ',')]
    pub delimiter: char,
}

const DEFAULT_HASH_BUCKETS: u64 = 1 << 24;

fn open(path: &Path) -> Result<BufReader<File>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(BufReader::with_capacity(1 << 18, file))
}

/// Converts the input and writes the output and its prototxt.
pub fn run(args: Args) -> Result<()> {
    let name = args.input.display().to_string();
    let out_file = File::create(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let mut out = BufWriter::with_capacity(1 << 18, out_file);
    let (lines, mut desc) = match args.from {
        Format::Fasttext => {
            let word_ids = match args.buckets {
                Some(buckets) => WordIds::Hashed { buckets },
                None => WordIds::Vocabulary,
            };
            let vocab = match (&args.vocab, args.build_vocab) {
                (Some(path), false) => Vocabulary::load(path)?,
                (vocab_path, _) => {
                    let mut vocab = Vocabulary::default();
                    vocab.scan(open(&args.input)?, &name, word_ids == WordIds::Vocabulary)?;
                    if let Some(path) = vocab_path {
                        vocab.save(path)?;
                        println!(
                            "vocabulary: {} words, {} labels -> {}",
                            vocab.word_ids() - 1,
                            vocab.labels(),
                            path.display()
                        );
                    }
                    vocab
                }
            };
            let opts = FastTextOptions {
                word_ids,
                bigram_buckets: args.bigram_buckets,
            };
            let lines = convert_fasttext(open(&args.input)?, &name, &mut out, &vocab, &opts)?;
            (lines, fasttext_desc())
        }
        Format::Libsvm | Format::Libffm => {
            let ffm = args.from == Format::Libffm;
            (
                convert_libsvm(open(&args.input)?, &name, &mut out, ffm)?,
                libsvm_desc(ffm),
            )
        }
        Format::Vw => {
            let buckets = args.buckets.unwrap_or(DEFAULT_HASH_BUCKETS);
            (
                convert_vw(open(&args.input)?, &name, &mut out, buckets)?,
                vw_desc(),
            )
        }
        Format::Csv => {
            let delimiter = u8::try_from(args.delimiter)
                .context("the CSV delimiter must be a single-byte character")?;
            let opts = CsvOptions {
                label: args.label_column.clone(),
                columns: args.columns.clone(),
                buckets: args.buckets.unwrap_or(DEFAULT_HASH_BUCKETS),
                delimiter,
            };
            convert_csv(open(&args.input)?, &name, &mut out, &opts)?
        }
    };
    out.flush()
        .with_context(|| format!("writing {}", args.output.display()))?;
    desc.batch_size = Some(args.batch_size);
    desc.validate()
        .map_err(|message| anyhow::anyhow!("converted desc: {message}"))?;
    let prototxt = args.prototxt.clone().unwrap_or_else(|| {
        args.output
            .parent()
            .unwrap_or(Path::new("."))
            .join("data.prototxt")
    });
    std::fs::write(&prototxt, desc.to_text())
        .with_context(|| format!("writing {}", prototxt.display()))?;
    println!(
        "{lines} lines -> {} (desc: {})",
        args.output.display(),
        prototxt.display()
    );
    // The CTR models read values, field numbers and weights only when told to.
    let ctr_keys = match args.from {
        Format::Libsvm => Some(libsvm_ctr_keys(false)),
        Format::Libffm => Some(libsvm_ctr_keys(true)),
        Format::Vw => Some(vw_ctr_keys()),
        Format::Fasttext | Format::Csv => None,
    };
    if let Some(keys) = ctr_keys {
        println!("note: for lr and fm to read every slot written here, add to [model]:");
        for line in keys.lines() {
            println!("  {line}");
        }
    }
    Ok(())
}
