//! Accuracy on an analogy test set, as gensim's `KeyedVectors.evaluate_word_analogies` measures
//! it (word2vec.c's `compute-accuracy`), on a file in its format (`questions-words.txt`):
//!
//! ```text
//! : capital-common-countries
//! Athens Greece Baghdad Iraq
//! ```
//!
//! A line starting with `: ` opens a section named by the rest of it; every other line is a
//! question `a b c expected`, "a is to b as c is to expected". The rules are gensim's
//! (defaults `restrict_vocab=300000`, `case_insensitive=True`, `dummy4unknown=False`):
//!
//! - Only the first `restrict_vocab` words of the vectors take part. With
//!   [`Case::Insensitive`] words are compared upper-cased, each standing for the first word of the
//!   vectors with that upper-case form.
//! - A question with a word outside them is skipped, and counted ([`SectionAccuracy::skipped`]).
//! - The others are answered by 3CosAdd among those words: the words nearest to
//!   `b - a + c` ([`WordVectors::query`]) other than the three query words' own vectors, best
//!   first. Of the first [`ANALOGY_TOPN`], the answer is the first whose (upper-case) form is
//!   none of `a`, `b`, `c`, else the last of them; the question is right when it is `expected`.
//! - A line of other than four words is skipped and counted nowhere ([`Questions::invalid_lines`]
//!   lists them, where gensim logs them).
//!
//! Differences: gensim refuses a file that begins with a blank line and fails on a file without a
//! question; a blank line is skipped here, and a file without a question refused when read.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::{Lines, WordVectors};
use crate::{Error, Result};

/// The ranked words an analogy's answer is taken from (gensim's `topn=5`).
pub const ANALOGY_TOPN: usize = 5;

/// How the words of questions and vectors are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Case {
    /// Upper-cased (Unicode's full mapping, as Python's `str.upper`): gensim's default.
    #[default]
    Insensitive,
    /// As they are.
    Sensitive,
}

impl Case {
    fn key(self, word: &str) -> String {
        match self {
            Case::Insensitive => word.to_uppercase(),
            Case::Sensitive => word.to_string(),
        }
    }
}

/// The questions of an analogy test set, by section.
#[derive(Debug, Clone)]
pub struct Questions {
    sections: Vec<Section>,
    invalid: Vec<u64>,
}

#[derive(Debug, Clone)]
struct Section {
    name: String,
    questions: Vec<[String; 4]>,
}

/// A section's counts (or the total's, [`Accuracy::total`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionAccuracy {
    /// The section's name (`: name` lines of the questions file), or `total`.
    pub name: String,
    /// Questions answered right.
    pub correct: usize,
    /// Questions answered wrong.
    pub incorrect: usize,
    /// Questions with a word outside the words that take part.
    pub skipped: usize,
}

impl SectionAccuracy {
    /// Questions answered, right or wrong.
    pub fn answered(&self) -> usize {
        self.correct + self.incorrect
    }

    /// The share answered right (0 when none was answered, as gensim's score).
    pub fn accuracy(&self) -> f64 {
        match self.answered() {
            0 => 0.0,
            n => self.correct as f64 / n as f64,
        }
    }
}

/// The result of [`Questions::evaluate`].
#[derive(Debug, Clone, PartialEq)]
pub struct Accuracy {
    /// Each section's counts, in the file's order.
    pub sections: Vec<SectionAccuracy>,
    /// The number of words that took part: `restrict_vocab`, or all when there are fewer.
    pub among: usize,
}

impl Accuracy {
    /// The counts of all sections together, named `Total accuracy` as gensim names them.
    pub fn total(&self) -> SectionAccuracy {
        let mut total = SectionAccuracy {
            name: "Total accuracy".into(),
            correct: 0,
            incorrect: 0,
            skipped: 0,
        };
        for s in &self.sections {
            total.correct += s.correct;
            total.incorrect += s.incorrect;
            total.skipped += s.skipped;
        }
        total
    }
}

impl Questions {
    /// Reads a questions file. Errors: a question before the first section header, text that is
    /// not UTF-8 (both name the line), no question at all.
    pub fn read(path: &Path) -> Result<Self> {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| Error::Io {
            path: name.clone(),
            message: format!("cannot open: {e}"),
        })?;
        Self::parse(BufReader::new(file), &name)
    }

    /// [`Questions::read`] of `reader`; `file` names it in errors.
    pub fn parse(reader: impl BufRead, file: &str) -> Result<Self> {
        let mut lines = Lines {
            reader,
            file,
            buf: Vec::new(),
            number: 0,
        };
        let mut questions = Questions {
            sections: Vec::new(),
            invalid: Vec::new(),
        };
        while let Some((line, text)) = lines.next()? {
            if text.starts_with(": ") {
                questions.sections.push(Section {
                    name: text.trim_start_matches([':', ' ']).trim().to_string(),
                    questions: Vec::new(),
                });
                continue;
            }
            let words: Vec<&str> = text.split_whitespace().collect();
            if words.is_empty() {
                continue;
            }
            let Some(section) = questions.sections.last_mut() else {
                return Err(Error::BadLine {
                    file: file.to_string(),
                    line,
                    message: "a question before the first section header (`: name`)".into(),
                });
            };
            match words[..] {
                [a, b, c, d] => section.questions.push([a, b, c, d].map(String::from)),
                _ => questions.invalid.push(line),
            }
        }
        if questions.is_empty() {
            return Err(Error::Io {
                path: file.to_string(),
                message: "no questions: expected `: section` headers, each followed by lines \
                          of four words, `a b c expected`"
                    .into(),
            });
        }
        Ok(questions)
    }

    /// The number of questions (lines of four words).
    pub fn len(&self) -> usize {
        self.sections.iter().map(|s| s.questions.len()).sum()
    }

    /// Whether there is no question (never: [`Questions::parse`] refuses none).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sections' names, in the file's order.
    pub fn section_names(&self) -> impl Iterator<Item = &str> {
        self.sections.iter().map(|s| s.name.as_str())
    }

    /// The lines of other than four words, skipped.
    pub fn invalid_lines(&self) -> &[u64] {
        &self.invalid
    }

    /// Answers every question with `vectors` (see the module docs), the first `restrict_vocab`
    /// words taking part.
    pub fn evaluate(&self, vectors: &WordVectors, restrict_vocab: usize, case: Case) -> Accuracy {
        let among = restrict_vocab.min(vectors.len());
        // The first word of each form stands for it: the most frequent in a sorted file.
        let mut known: HashMap<String, usize> = HashMap::with_capacity(among);
        for (i, word) in vectors.words()[..among].iter().enumerate() {
            known.entry(case.key(word)).or_insert(i);
        }
        let mut accuracy = Accuracy {
            sections: Vec::with_capacity(self.sections.len()),
            among,
        };
        let mut asked = Vec::new();
        let mut queries = Vec::new();
        for (s, section) in self.sections.iter().enumerate() {
            accuracy.sections.push(SectionAccuracy {
                name: section.name.clone(),
                correct: 0,
                incorrect: 0,
                skipped: 0,
            });
            for question in &section.questions {
                let keys = question.each_ref().map(|w| case.key(w));
                match keys.each_ref().map(|k| known.get(k)) {
                    [Some(&a), Some(&b), Some(&c), Some(_)] => {
                        queries.push(vectors.query(&[b, c], &[a]));
                        asked.push((s, keys));
                    }
                    _ => accuracy.sections[s].skipped += 1,
                }
            }
        }
        let answers = vectors.nearest(&queries, ANALOGY_TOPN, among);
        for ((s, [a, b, c, expected]), answer) in asked.into_iter().zip(answers) {
            let mut predicted = None;
            for n in answer {
                let word = case.key(vectors.word(n.index));
                let other = word != a && word != b && word != c;
                predicted = Some(word);
                if other {
                    break;
                }
            }
            let section = &mut accuracy.sections[s];
            if predicted.as_ref() == Some(&expected) {
                section.correct += 1;
            } else {
                section.incorrect += 1;
            }
        }
        accuracy
    }
}
