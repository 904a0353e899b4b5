//! `hogwild convert`: turns fastText, libsvm, libffm, Vowpal Wabbit or CSV text into MultiSlot
//! lines and writes the matching data.prototxt; for libsvm, libffm and VW it prints the
//! `[model]` keys with which the CTR models read the values, field numbers and weights.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hogwild::feed::DataFeedDesc;
use hogwild::subwords::Subwords;
use hogwild::tools::convert::{
    convert_csv, convert_libsvm, convert_vw, fasttext_desc, libsvm_ctr_keys, libsvm_desc,
    vw_ctr_keys, vw_desc, CsvOptions, FastTextOptions, Vocabulary, WordIds,
};

use crate::paths;
use crate::say;

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
    /// Input file (`-`: standard input).
    pub input: PathBuf,
    /// Output MultiSlot file (`-`: standard output). Written whole or not at all: on an error
    /// an existing file stays as it was.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Where to write the matching data.prototxt (default: data.prototxt next to the output, in
    /// the current directory for `-o -`). An existing one with other content is left alone
    /// unless --force is given; one with the same content is kept as it is.
    #[arg(long)]
    pub prototxt: Option<PathBuf>,
    /// Replace an existing data.prototxt whose content differs from the converted data's.
    #[arg(long)]
    pub force: bool,
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
    /// fastText: follow each word with its character n-grams of --minn to --maxn characters,
    /// hashed into --subword-buckets buckets (fastText's -minn, -maxn, -bucket). Given with
    /// --build-vocab, the three are kept in the vocabulary, and converting with --vocab repeats
    /// them.
    #[arg(long, requires_all = ["maxn", "subword_buckets"])]
    pub minn: Option<usize>,
    /// fastText: the longest character n-gram (see --minn).
    #[arg(long, requires_all = ["minn", "subword_buckets"])]
    pub maxn: Option<usize>,
    /// fastText: buckets of the character n-grams (see --minn); the model's `subword_buckets`.
    #[arg(long, requires_all = ["minn", "maxn"])]
    pub subword_buckets: Option<u64>,
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

/// The desc as written: the batch size set, checked, in text format.
fn desc_text(mut desc: DataFeedDesc, batch_size: i32) -> Result<String> {
    desc.batch_size = Some(batch_size);
    desc.validate()
        .map_err(|message| anyhow::anyhow!("converted desc: {message}"))?;
    Ok(desc.to_text())
}

/// The desc every conversion from `format` writes, known before converting: all but CSV's,
/// whose slots are the columns found in the input.
fn fixed_desc(format: Format) -> Option<DataFeedDesc> {
    match format {
        Format::Fasttext => Some(fasttext_desc()),
        Format::Libsvm => Some(libsvm_desc(false)),
        Format::Libffm => Some(libsvm_desc(true)),
        Format::Vw => Some(vw_desc()),
        Format::Csv => None,
    }
}

/// The character n-grams that --minn, --maxn and --subword-buckets ask for, checked.
fn subword_options(args: &Args) -> Result<Option<Subwords>> {
    let (Some(minn), Some(maxn), Some(buckets)) = (args.minn, args.maxn, args.subword_buckets)
    else {
        return Ok(None);
    };
    if args.from != Format::Fasttext {
        bail!("--minn, --maxn and --subword-buckets are for --from fasttext");
    }
    match Subwords::new(minn, maxn, buckets) {
        Ok(subwords) => Ok(Some(subwords)),
        Err(hogwild::Error::InvalidConfig { field, reason }) => {
            bail!("--{}: {reason}", field.replace('_', "-"))
        }
        Err(e) => Err(e.into()),
    }
}

/// The character n-grams of a conversion with the saved vocabulary `path` (the training data's,
/// `saved`) and the options' `asked`: the test data must repeat the training data's.
fn saved_subwords(
    path: &Path,
    saved: Option<Subwords>,
    asked: Option<Subwords>,
) -> Result<Option<Subwords>> {
    let describe = |sw: &Subwords| {
        format!(
            "--minn {} --maxn {} --subword-buckets {}",
            sw.minn(),
            sw.maxn(),
            sw.buckets()
        )
    };
    match (saved, asked) {
        (saved, None) => Ok(saved),
        (Some(saved), Some(asked)) if saved == asked => Ok(Some(saved)),
        (Some(saved), Some(asked)) => bail!(
            "--vocab {}: the training data was converted with {}, not {}: its n-gram ids would \
             mean other n-grams here (leave the options out to repeat the vocabulary's)",
            path.display(),
            describe(&saved),
            describe(&asked)
        ),
        (None, Some(asked)) => bail!(
            "--vocab {}: the training data was converted without character n-grams, so a model \
             trained on it has no rows for the {} asked for; convert the training data with them \
             (and --build-vocab) first",
            path.display(),
            describe(&asked)
        ),
    }
}

/// What becomes of the desc file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DescFile {
    New,
    /// It exists with this content already.
    Unchanged,
    /// It exists with other content, replaced as --force asks.
    Replaced,
}

/// Decides what to do with the desc file `path` that should hold `text`: a user's data.prototxt
/// is never rewritten with other content unless `force`.
fn desc_file(path: &Path, text: &str, force: bool) -> Result<DescFile> {
    let existing = match std::fs::read(path) {
        Ok(existing) => existing,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DescFile::New),
        Err(e) => bail!("{}: cannot read the existing desc: {e}", path.display()),
    };
    if existing == text.as_bytes() {
        return Ok(DescFile::Unchanged);
    }
    if force {
        return Ok(DescFile::Replaced);
    }
    let existing = String::from_utf8_lossy(&existing);
    let (n, (old, new)) = existing
        .lines()
        .map(Some)
        .chain(std::iter::repeat(None))
        .zip(text.lines().map(Some).chain(std::iter::repeat(None)))
        .take_while(|pair| *pair != (None, None))
        .enumerate()
        .find(|(_, (old, new))| old != new)
        .unwrap_or((0, (None, None)));
    bail!(
        "{} exists and differs from the desc of the converted data (line {}: {:?} there, {:?} \
         here); it is left as it is and nothing was written. Give --prototxt PATH to write the \
         desc elsewhere, or --force to replace it",
        path.display(),
        n + 1,
        old.unwrap_or("(end of file)"),
        new.unwrap_or("(end of file)"),
    )
}

/// Converts the input and writes the output and its prototxt. Every input is checked and every
/// conflict with an existing file found before anything is written; the outputs are written
/// whole to temporary files and put in place only once the conversion has succeeded, so a
/// failure leaves every file as it was.
pub fn run(args: Args) -> Result<()> {
    let input = paths::input(&args.input);
    let name = if paths::is_stdio(&args.input) {
        "standard input".to_string()
    } else {
        input.display().to_string()
    };
    let to_stdout = paths::is_stdio(&args.output);
    let prototxt = args.prototxt.clone().unwrap_or_else(|| {
        args.output
            .parent()
            .unwrap_or(Path::new("."))
            .join("data.prototxt")
    });
    let fasttext = args.from == Format::Fasttext;
    // fastText reads a vocabulary named with --vocab, or builds one (written to --vocab when
    // --build-vocab asks for it).
    let vocab_in = args
        .vocab
        .as_deref()
        .filter(|_| fasttext && !args.build_vocab);
    let vocab_out = args
        .vocab
        .as_deref()
        .filter(|_| fasttext && args.build_vocab);

    let asked_subwords = subword_options(&args)?;
    let inputs: Vec<&Path> = std::iter::once(input.as_path()).chain(vocab_in).collect();
    paths::check_inputs("input", inputs.iter().copied())?;
    let mut outputs = vec![
        ("the output", args.output.as_path()),
        ("the desc", &prototxt),
    ];
    outputs.extend(vocab_out.map(|v| ("the vocabulary", v)));
    for (k, (what, path)) in outputs.iter().enumerate() {
        paths::refuse_overwrite(path, what, inputs.iter().copied())?;
        for (other, earlier) in &outputs[..k] {
            if hogwild::files::same_file(path, earlier) {
                bail!(
                    "{what} and {other} are both {}: give them different files",
                    path.display()
                );
            }
        }
    }
    if fasttext && vocab_in.is_none() {
        paths::refuse_read_once(
            std::slice::from_ref(&input),
            "building the vocabulary reads it before converting it (give --vocab to use a \
             saved one)",
        )?;
    }
    let fixed = fixed_desc(args.from)
        .map(|desc| desc_text(desc, args.batch_size))
        .transpose()?;
    if let Some(text) = &fixed {
        desc_file(&prototxt, text, args.force)?;
    }

    let mut out = paths::output(&args.output, to_stdout)?;
    let mut vocab_file = None;
    // fastText: the bag-of-words model's `vocab` and `classes` for the ids written.
    let mut bow_ids = None;
    // The desc found in the input (CSV's columns); the other formats' is `fixed`.
    let (lines, desc) = match args.from {
        Format::Fasttext => {
            let word_ids = match args.buckets {
                Some(buckets) => WordIds::Hashed { buckets },
                None => WordIds::Vocabulary,
            };
            let vocab = match vocab_in {
                Some(path) => {
                    let mut vocab = Vocabulary::load(path)?;
                    let subwords = saved_subwords(path, vocab.subwords(), asked_subwords)?;
                    vocab.set_subwords(subwords);
                    vocab
                }
                None => {
                    let mut vocab = Vocabulary::default();
                    vocab.set_subwords(asked_subwords);
                    vocab.scan(open(&input)?, &name, word_ids == WordIds::Vocabulary)?;
                    if let Some(path) = vocab_out {
                        let mut file = paths::output(path, to_stdout)?;
                        vocab.write(&mut file)?;
                        let counts = (vocab.word_ids() - 1, vocab.labels());
                        vocab_file = Some((file, counts));
                    }
                    vocab
                }
            };
            let opts = FastTextOptions {
                word_ids,
                bigram_buckets: args.bigram_buckets,
                subwords: vocab.subwords(),
            };
            let lines = opts.convert(&vocab, open(&input)?, &name, &mut out)?;
            let subword_buckets = opts.subwords.map_or(0, |sw| sw.buckets());
            bow_ids = Some((opts.id_space(&vocab), vocab.labels(), subword_buckets));
            (lines, None)
        }
        Format::Libsvm | Format::Libffm => {
            let ffm = args.from == Format::Libffm;
            (convert_libsvm(open(&input)?, &name, &mut out, ffm)?, None)
        }
        Format::Vw => {
            let buckets = args.buckets.unwrap_or(DEFAULT_HASH_BUCKETS);
            (convert_vw(open(&input)?, &name, &mut out, buckets)?, None)
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
            let (lines, desc) = convert_csv(open(&input)?, &name, &mut out, &opts)?;
            (lines, Some(desc))
        }
    };
    let text = match desc {
        Some(desc) => desc_text(desc, args.batch_size)?,
        None => fixed.context("the format has no desc")?,
    };
    // Checked again: CSV's desc is known only now.
    let desc_state = desc_file(&prototxt, &text, args.force)?;
    let desc_out = if desc_state == DescFile::Unchanged {
        None
    } else {
        let mut file = paths::output(&prototxt, to_stdout)?;
        std::io::Write::write_all(&mut file, text.as_bytes())
            .with_context(|| format!("writing {}", prototxt.display()))?;
        Some(file)
    };

    // Everything is written: put it in place.
    let out_name = out.name().to_string();
    out.commit()?;
    if let Some((file, (words, labels))) = vocab_file {
        let vocab_name = file.name().to_string();
        file.commit()?;
        say!(
            to_stdout,
            "vocabulary: {words} words (ids 1 to {words}; 0 is any other word), {labels} labels \
             -> {vocab_name}"
        );
    }
    if let Some(file) = desc_out {
        file.commit()?;
    }
    let desc_note = match desc_state {
        DescFile::New => "",
        DescFile::Unchanged => ", unchanged",
        DescFile::Replaced => ", replaced: its content differed (--force)",
    };
    say!(
        to_stdout,
        "{lines} lines -> {out_name} (desc: {}{desc_note})",
        prototxt.display()
    );
    // The CTR models read values, field numbers and weights only when told to.
    let ctr_keys = match args.from {
        Format::Libsvm => Some(libsvm_ctr_keys(false)),
        Format::Libffm => Some(libsvm_ctr_keys(true)),
        Format::Vw => Some(vw_ctr_keys()),
        Format::Fasttext | Format::Csv => None,
    };
    if let Some((vocab, classes, subword_buckets)) = bow_ids {
        say!(
            to_stdout,
            "note: for bow to read the ids written here, set in [model]:"
        );
        say!(to_stdout, "  vocab = {vocab}");
        say!(to_stdout, "  classes = {classes}");
        if subword_buckets > 0 {
            say!(to_stdout, "  subword_buckets = {subword_buckets}");
        }
        if let Some(path) = &args.vocab {
            say!(
                to_stdout,
                "note: train with --labels {} to keep the label names in the model",
                path.display()
            );
        }
    }
    if let Some(keys) = ctr_keys {
        say!(
            to_stdout,
            "note: for lr, fm and ffm to read every slot written here, add to [model]:"
        );
        for line in keys.lines() {
            say!(to_stdout, "  {line}");
        }
        if args.from == Format::Libffm {
            say!(
                to_stdout,
                "note: ffm also needs num_fields = N, one more than the largest field number"
            );
        }
    }
    Ok(())
}
