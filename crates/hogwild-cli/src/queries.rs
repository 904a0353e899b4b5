//! `hogwild nn` and `hogwild analogy`: a word2vec model's vectors (or any vectors in word2vec's
//! text format) queried as gensim's `KeyedVectors` queries them, so that judging a model needs
//! no Python: nearest neighbours (`most_similar(positive=[word])`), analogies
//! (`most_similar(positive=[b, c], negative=[a])`) and the accuracy on an analogy test set
//! (`evaluate_word_analogies`). See [`hogwild::vectors`] for the semantics.
//!
//! An answer is a block of lines `word<TAB>similarity` (six decimals), best first; the blocks of
//! several queries are separated by an empty line. Queries are read from standard input when none
//! is given on the command line, one per line (word2vec.c's `distance` and `word-analogy`): a bad
//! one is reported on standard error, its block left empty, and the next one answered.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use hogwild::models::ModelKind;
use hogwild::vectors::{Case, Neighbour, Questions, Term, WordVectors};

use crate::models::AnyModel;
use crate::paths;

/// Where the vectors come from: a model or a vectors file.
#[derive(ClapArgs, Debug)]
#[group(required = true, multiple = false)]
pub struct Source {
    /// A word2vec model saved by `hogwild train --save`: its input vectors, the ones `hogwild
    /// export` writes (the words `min_count` keeps, most frequent first), at full precision;
    /// with subwords, a word outside them has its character n-grams' vector (`hogwild
    /// word-vectors`).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Vectors in word2vec's text format: a `count dim` line, then `word v1 ... v_dim` per word
    /// (what `hogwild export`, gensim's `save_word2vec_format` and word2vec.c's `-binary 0`
    /// write).
    #[arg(long, value_name = "FILE")]
    pub vectors: Option<PathBuf>,
}

#[derive(ClapArgs, Debug)]
pub struct NnArgs {
    #[command(flatten)]
    pub source: Source,
    /// Neighbours per query (gensim's `topn`).
    #[arg(short = 'k', value_name = "N", default_value_t = 10, value_parser = parse_k)]
    pub k: usize,
    /// The words to query, each on its own; an argument of several words (quoted) queries their
    /// mean, as gensim's `most_similar(positive=[w1, w2])`. None: a query per line of standard
    /// input.
    #[arg(value_name = "WORD")]
    pub words: Vec<String>,
}

#[derive(ClapArgs, Debug)]
pub struct AnalogyArgs {
    #[command(flatten)]
    pub source: Source,
    /// Answers per question (gensim's `topn`).
    #[arg(short = 'k', value_name = "N", default_value_t = 10, value_parser = parse_k)]
    pub k: usize,
    /// A B C: "A is to B as C is to ?", the words nearest to B - A + C (gensim's
    /// `most_similar(positive=[B, C], negative=[A])`, 3CosAdd). None: three words per line of
    /// standard input.
    #[arg(value_name = "WORD", conflicts_with = "questions")]
    pub words: Vec<String>,
    /// An analogy test set in the format of word2vec's questions-words.txt (`: section` lines,
    /// then `a b c expected` lines): prints the accuracy of each section and of all, as gensim's
    /// `evaluate_word_analogies` logs it.
    #[arg(long, value_name = "FILE", conflicts_with = "k")]
    pub questions: Option<PathBuf>,
    // Also conflicting with the words: given words (which conflict with --questions), clap did
    // not report the missing --questions that `requires` asks for.
    /// With --questions: only the first N words of the vectors take part (gensim's
    /// `restrict_vocab`); questions with another word are skipped [default: 300000, gensim's].
    #[arg(long, value_name = "N", value_parser = parse_restrict, requires = "questions",
          conflicts_with = "words")]
    pub restrict_vocab: Option<usize>,
    /// With --questions: compare words as they are (gensim's `case_insensitive=False`); by
    /// default they are compared upper-cased.
    #[arg(long, requires = "questions", conflicts_with = "words")]
    pub case_sensitive: bool,
}

/// `-k`: 1 or more.
fn parse_k(text: &str) -> std::result::Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 words answer nothing: give 1 or more".into()),
        Ok(k) => Ok(k),
        Err(e) => Err(format!("\"{text}\" is not a number of words: {e}")),
    }
}

/// gensim's `restrict_vocab` of `evaluate_word_analogies`.
const RESTRICT_VOCAB: usize = 300_000;

/// `--restrict-vocab`: 1 or more.
fn parse_restrict(text: &str) -> std::result::Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 words answer no question: give 1 or more".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("\"{text}\" is not a number of words: {e}")),
    }
}

impl Source {
    fn path(&self) -> &Path {
        match (&self.model, &self.vectors) {
            (Some(model), _) => model,
            (None, Some(vectors)) => vectors,
            // clap's group requires one of them.
            (None, None) => unreachable!("--model or --vectors is required"),
        }
    }

    fn option(&self) -> &'static str {
        if self.model.is_some() {
            "--model"
        } else {
            "--vectors"
        }
    }

    /// Checks that the file exists, before other inputs are read.
    fn check(&self) -> Result<()> {
        paths::check_inputs(self.option(), [self.path()])
    }

    /// The vectors, unit-normalised, and the model when it has subwords.
    fn load(&self) -> Result<Loaded> {
        let path = self.path();
        if self.vectors.is_some() {
            let (vectors, duplicates) = WordVectors::read_text(path)?;
            if let Some(first) = duplicates.first() {
                eprintln!(
                    "warning: {}: {} word{} given again, the first vector of each kept (as \
                     gensim keeps it); first: {:?} on line {}",
                    path.display(),
                    duplicates.len(),
                    if duplicates.len() == 1 { "" } else { "s" },
                    first.word,
                    first.line
                );
            }
            return Ok(Loaded {
                vectors,
                model: None,
            });
        }
        let (config, model) = crate::models::load(path).map_err(|e| {
            if looks_like_text_vectors(path) {
                anyhow::anyhow!(
                    "{e:#}; it looks like vectors in word2vec's text format: give it with \
                     --vectors"
                )
            } else {
                e
            }
        })?;
        let AnyModel::Word2vecSgd(w2v) = &model else {
            let kind = match config.model {
                ModelKind::Bow(_) => "bag-of-words (bow)",
                ModelKind::Lr(_) => "logistic-regression (lr)",
                ModelKind::Fm(_) => "factorization-machine (fm)",
                ModelKind::Ffm(_) => "field-aware factorization-machine (ffm)",
                ModelKind::Word2vec(_) => unreachable!("a word2vec config builds a word2vec model"),
            };
            bail!(
                "{}: a {kind} model: only word2vec models have word vectors to query",
                path.display()
            );
        };
        let vectors =
            WordVectors::from_word2vec(w2v).with_context(|| path.display().to_string())?;
        let subwords = w2v.subwords().is_some();
        Ok(Loaded {
            vectors,
            model: subwords.then_some(model),
        })
    }
}

/// The vectors queried, and the model they come from when it has subwords: a word outside the
/// vectors then has the mean of its character n-grams' rows, as in fastText's `nn` and gensim's
/// `FastText` (`hogwild word-vectors` prints the same vector).
struct Loaded {
    vectors: WordVectors,
    model: Option<AnyModel>,
}

impl Loaded {
    /// The term of each word: its vector's index, or its n-grams' vector; the error names the
    /// first word that has neither.
    fn terms(&self, words: &[&str]) -> Result<Vec<Term>> {
        let model = match &self.model {
            Some(AnyModel::Word2vecSgd(m)) => Some(m),
            _ => None,
        };
        let term = |word: &str| match (self.vectors.index(word), model) {
            (Some(i), _) => Ok(Term::Word(i)),
            (None, Some(m)) => {
                let mut v = vec![0.0; self.vectors.dim()];
                match m.ngram_vector(word, &mut v) {
                    Some(n) if n > 0 => Ok(Term::Vector(v)),
                    _ => Err(anyhow::anyhow!(
                        "\"{word}\" has no vector: it is none of the {} words, and none of its \
                         character n-grams is of the model's lengths",
                        self.vectors.len()
                    )),
                }
            }
            (None, None) => Err(unknown(&self.vectors, word)),
        };
        words.iter().map(|w| term(w)).collect()
    }
}

/// Whether the file's first line is a `count dim` header (a vectors file given as a model).
fn looks_like_text_vectors(path: &Path) -> bool {
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(64).read_to_end(&mut head));
    let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
    read.is_ok()
        && std::str::from_utf8(first).is_ok_and(|line| {
            let numbers: Vec<&str> = line.split_ascii_whitespace().collect();
            numbers.len() == 2 && numbers.iter().all(|n| n.parse::<u64>().is_ok())
        })
}

/// The error of a word that has no vector, naming a word that differs only in case if there is
/// one (lookups are exact, as gensim's).
fn unknown(vectors: &WordVectors, word: &str) -> anyhow::Error {
    let lower = word.to_lowercase();
    match vectors.words().iter().find(|w| w.to_lowercase() == lower) {
        Some(other) => anyhow::anyhow!(
            "\"{word}\" has no vector (words are matched exactly; there is \"{other}\")"
        ),
        None => anyhow::anyhow!(
            "\"{word}\" has no vector (it is none of the {} words)",
            vectors.len()
        ),
    }
}

/// The `k` words nearest to the mean of `positive` minus `negative`; refused when that has no
/// direction (the words' vectors are zero or cancel out), where every word is as near as another.
fn answer(
    vectors: &WordVectors,
    positive: &[Term],
    negative: &[Term],
    k: usize,
) -> Result<Vec<Neighbour>> {
    let query = vectors.query_terms(positive, negative);
    if query.is_zero() {
        bail!("the query's vectors add up to zero: no word is nearer than another");
    }
    Ok(vectors.nearest(&[query], k, vectors.len()).remove(0))
}

/// Writes an answer's block.
fn write_block(out: &mut impl Write, vectors: &WordVectors, answer: &[Neighbour]) -> Result<()> {
    for n in answer {
        writeln!(out, "{}\t{:.6}", vectors.word(n.index), n.similarity)?;
    }
    Ok(())
}

/// Answers one query per non-blank line of standard input with `ask` (its words → the answer),
/// a block each; a failed query is reported with its line number, its block left empty. Fails at
/// the end when any query failed. `prompt` is shown when standard input is a terminal.
fn answer_stdin(
    vectors: &WordVectors,
    prompt: &str,
    ask: impl Fn(&[&str]) -> Result<Vec<Neighbour>>,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let (mut asked, mut failed) = (0usize, 0usize);
    paths::stdin_lines(prompt, |line, text, _| {
        let result = match text {
            Ok(text) => {
                let words: Vec<&str> = text.split_whitespace().collect();
                if words.is_empty() {
                    return Ok(());
                }
                ask(&words)
            }
            Err(_) => Err(anyhow::anyhow!("not UTF-8 text")),
        };
        if asked > 0 {
            writeln!(out)?;
        }
        asked += 1;
        match result {
            Ok(answer) => write_block(&mut out, vectors, &answer)?,
            Err(e) => {
                failed += 1;
                eprintln!("error: standard input line {line}: {e:#}");
            }
        }
        out.flush()?;
        Ok(())
    })?;
    if failed > 0 {
        bail!("{failed} of the {asked} queries of standard input failed (above)");
    }
    Ok(())
}

pub fn run_nn(args: NnArgs) -> Result<()> {
    args.source.check()?;
    let loaded = args.source.load()?;
    let (vectors, k) = (&loaded.vectors, args.k);
    if args.words.is_empty() {
        return answer_stdin(vectors, "words (Ctrl-D ends): ", |words| {
            answer(vectors, &loaded.terms(words)?, &[], k)
        });
    }
    // Every query is checked before any is answered.
    let mut queries = Vec::with_capacity(args.words.len());
    for arg in &args.words {
        let words: Vec<&str> = arg.split_whitespace().collect();
        if words.is_empty() {
            bail!("an empty WORD argument: give a word");
        }
        queries.push(loaded.terms(&words)?);
    }
    let mut answers = Vec::with_capacity(queries.len());
    for (arg, positive) in args.words.iter().zip(&queries) {
        answers.push(answer(vectors, positive, &[], k).with_context(|| format!("\"{arg}\""))?);
    }
    let mut out = std::io::stdout().lock();
    for (i, answer) in answers.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        write_block(&mut out, vectors, answer)?;
    }
    Ok(())
}

pub fn run_analogy(args: AnalogyArgs) -> Result<()> {
    if let Some(questions) = &args.questions {
        return evaluate(&args, questions);
    }
    let n = args.words.len();
    if n != 0 && n != 3 {
        bail!(
            "analogy takes three words, A B C (\"A is to B as C is to ?\"), or none to read them \
             from standard input; got {n}"
        );
    }
    args.source.check()?;
    let loaded = args.source.load()?;
    let (vectors, k) = (&loaded.vectors, args.k);
    let ask = |words: &[&str]| -> Result<Vec<Neighbour>> {
        let [a, b, c] = words[..] else {
            bail!("{} words: an analogy is three, A B C", words.len());
        };
        let [a, b, c]: [Term; 3] = loaded
            .terms(&[a, b, c])?
            .try_into()
            .map_err(|_| anyhow::anyhow!("three words give three terms"))?;
        answer(vectors, &[b, c], &[a], k)
    };
    if n == 0 {
        return answer_stdin(
            vectors,
            "A B C, for \"A is to B as C is to ?\" (Ctrl-D ends): ",
            ask,
        );
    }
    let words: Vec<&str> = args.words.iter().map(String::as_str).collect();
    let answer = ask(&words)?;
    write_block(&mut std::io::stdout().lock(), vectors, &answer)
}

/// `analogy --questions`: the accuracy on a test set, printed as gensim logs it.
fn evaluate(args: &AnalogyArgs, path: &Path) -> Result<()> {
    // The questions before the vectors, which may take long to load.
    paths::check_inputs("--questions", [path])?;
    args.source.check()?;
    let questions = Questions::read(path)?;
    let invalid = questions.invalid_lines();
    if !invalid.is_empty() {
        let shown: Vec<String> = invalid.iter().take(10).map(u64::to_string).collect();
        let more = match invalid.len() {
            n if n > 10 => format!(" and {} more", n - 10),
            _ => String::new(),
        };
        eprintln!(
            "warning: {}: line{} {}{more}: not four words: skipped, as gensim skips them",
            path.display(),
            if invalid.len() == 1 { "" } else { "s" },
            shown.join(", ")
        );
    }
    let vectors = args.source.load()?.vectors;
    let case = if args.case_sensitive {
        Case::Sensitive
    } else {
        Case::Insensitive
    };
    let restrict_vocab = args.restrict_vocab.unwrap_or(RESTRICT_VOCAB);
    let accuracy = questions.evaluate(&vectors, restrict_vocab, case);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: {} questions, answered with the first {} of the {} words of {} (restrict_vocab {}), \
         compared {}",
        path.display(),
        questions.len(),
        accuracy.among,
        vectors.len(),
        args.source.path().display(),
        restrict_vocab,
        match case {
            Case::Insensitive => "upper-cased",
            Case::Sensitive => "as they are",
        }
    )?;
    for section in &accuracy.sections {
        score_line(&mut out, section)?;
    }
    let total = accuracy.total();
    writeln!(
        out,
        "Quadruplets with out-of-vocabulary words: {:.1}%",
        100.0 * total.skipped as f64 / questions.len() as f64
    )?;
    score_line(&mut out, &total)?;
    writeln!(
        out,
        "skipped: {} of {} questions, with a word outside the first {} words",
        total.skipped,
        questions.len(),
        accuracy.among
    )?;
    Ok(())
}

/// gensim's line of a section (`name: 80.0% (4/5)`), or one saying that it answered nothing
/// (which gensim leaves out).
fn score_line(out: &mut impl Write, s: &hogwild::vectors::SectionAccuracy) -> Result<()> {
    match s.answered() {
        0 => writeln!(
            out,
            "{}: no question answered ({} skipped)",
            s.name, s.skipped
        )?,
        n => writeln!(
            out,
            "{}: {:.1}% ({}/{n})",
            s.name,
            100.0 * s.accuracy(),
            s.correct
        )?,
    }
    Ok(())
}
