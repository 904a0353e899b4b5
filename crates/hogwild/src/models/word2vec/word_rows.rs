//! The input rows of each vocabulary word when word2vec has subwords (fastText's
//! `Dictionary::initNgrams`): the word's own row, then one row per character n-gram of the word
//! ([`Subwords`]), the n-gram rows numbered after the vocabulary's (`words + bucket`, as fastText
//! numbers them `nwords + hash % bucket`). A word's input vector is the mean of its rows.

use crate::subwords::Subwords;

/// Every vocabulary word's input rows, one list after another.
#[derive(Debug, Clone)]
pub(crate) struct WordRows {
    subwords: Subwords,
    /// The vocabulary's size: the first n-gram row.
    words: usize,
    /// Per word, where its rows end in `rows` (word `i`'s are `ends[i - 1]..ends[i]`).
    ends: Vec<usize>,
    rows: Vec<u32>,
}

impl WordRows {
    /// The rows of every word of `words` (the vocabulary, in id order). The caller checks that
    /// `words.len() + subwords.buckets()` rows are numbered by `u32`.
    pub(crate) fn new(subwords: Subwords, words: &[String]) -> Self {
        let mut ends = Vec::with_capacity(words.len());
        let mut rows = Vec::new();
        let mut grams = Vec::new();
        for (id, word) in words.iter().enumerate() {
            rows.push(id as u32);
            grams.clear();
            subwords.push_ids(word, words.len() as u64, &mut grams);
            rows.extend(grams.iter().map(|&r| r as u32));
            ends.push(rows.len());
        }
        Self {
            subwords,
            words: words.len(),
            ends,
            rows,
        }
    }

    /// The n-gram lengths and buckets.
    pub(crate) fn subwords(&self) -> Subwords {
        self.subwords
    }

    /// Word `id`'s rows: its own, then its n-grams' (a word keeps an n-gram as often as it
    /// occurs, as fastText keeps it).
    #[inline(always)]
    pub(crate) fn of(&self, id: usize) -> &[u32] {
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.rows[start..self.ends[id]]
    }

    /// Replaces `rows` with the n-gram rows of `word`, whatever word it is (fastText's
    /// `getSubwords` of a word outside the dictionary: no row of its own).
    pub(crate) fn of_text(&self, word: &str, rows: &mut Vec<u64>) {
        rows.clear();
        self.subwords.push_ids(word, self.words as u64, rows);
    }
}
