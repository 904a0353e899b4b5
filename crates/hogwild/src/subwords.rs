//! Character n-grams of words (fastText's subwords): a word is wrapped in `<` and `>`, and every
//! run of `minn` to `maxn` characters (UTF-8 code points) of the wrapped word, except the lone `<`
//! and `>`, is hashed with fastText's word hash into one of `buckets` rows. The bucket of an
//! n-gram is the one fastText gives it: its `Dictionary::computeSubwords` id less `nwords`.
//!
//! ```
//! use hogwild::subwords::Subwords;
//! let sw = Subwords::new(3, 4, 1000).unwrap();
//! let mut grams = Vec::new();
//! sw.for_each("cat", |gram, _bucket| grams.push(String::from_utf8(gram.to_vec()).unwrap()));
//! assert_eq!(grams, ["<ca", "<cat", "cat", "cat>", "at>"]);
//! ```

use crate::rng::fasttext_hash_bytes;
use crate::{Error, Result};

/// The n-gram lengths and the number of buckets they are hashed into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subwords {
    minn: usize,
    maxn: usize,
    buckets: u64,
}

/// Whether `b` continues a UTF-8 character (is not its first byte).
fn continues(b: u8) -> bool {
    b & 0xC0 == 0x80
}

impl Subwords {
    /// N-grams of `minn` to `maxn` characters in `buckets` buckets. Refused, naming the option:
    /// `minn` 0, `minn > maxn`, `buckets` 0.
    pub fn new(minn: usize, maxn: usize, buckets: u64) -> Result<Self> {
        let bad = |field: &str, reason: String| {
            Err(Error::InvalidConfig {
                field: field.into(),
                reason,
            })
        };
        if minn == 0 {
            return bad(
                "minn",
                "must be at least 1 (the shortest n-gram, in characters)".into(),
            );
        }
        if minn > maxn {
            return bad(
                "maxn",
                format!("must be at least minn ({minn}), got {maxn}"),
            );
        }
        if buckets == 0 {
            return bad(
                "subword_buckets",
                "must be at least 1 for n-grams (minn, maxn) to have rows".into(),
            );
        }
        Ok(Self {
            minn,
            maxn,
            buckets,
        })
    }

    /// The shortest n-gram, in characters.
    pub fn minn(&self) -> usize {
        self.minn
    }
    /// The longest n-gram, in characters.
    pub fn maxn(&self) -> usize {
        self.maxn
    }
    /// The number of buckets.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }

    /// Calls `f` with each n-gram of `word` (its UTF-8 bytes, `<` and `>` included) and its
    /// bucket, in fastText's order: by start, then by length.
    pub fn for_each(&self, word: &str, mut f: impl FnMut(&[u8], u64)) {
        let mut wrapped = Vec::with_capacity(word.len() + 2);
        wrapped.push(b'<');
        wrapped.extend_from_slice(word.as_bytes());
        wrapped.push(b'>');
        let bytes = &wrapped[..];
        for start in (0..bytes.len()).filter(|&i| !continues(bytes[i])) {
            let mut end = start;
            for n in 1..=self.maxn {
                if end == bytes.len() {
                    break;
                }
                end += 1;
                while end < bytes.len() && continues(bytes[end]) {
                    end += 1;
                }
                // The lone `<` and `>` are no n-grams (fastText's rule for n = 1).
                let edge = n == 1 && (start == 0 || end == bytes.len());
                if n >= self.minn && !edge {
                    let gram = &bytes[start..end];
                    f(gram, u64::from(fasttext_hash_bytes(gram)) % self.buckets);
                }
            }
        }
    }

    /// Appends `offset + bucket` for each n-gram of `word` to `ids`.
    pub fn push_ids(&self, word: &str, offset: u64, ids: &mut Vec<u64>) {
        self.for_each(word, |_, bucket| ids.push(offset + bucket));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grams(sw: &Subwords, word: &str) -> (Vec<String>, Vec<u64>) {
        let (mut names, mut buckets) = (Vec::new(), Vec::new());
        sw.for_each(word, |g, b| {
            names.push(String::from_utf8(g.to_vec()).unwrap());
            buckets.push(b);
        });
        (names, buckets)
    }

    // fastText itself (pip fasttext-numpy2-wheel), on a file whose dictionary has 8 entries:
    //   m = fasttext.train_supervised(input="t.txt", minn=3, maxn=6, bucket=1000000, dim=2,
    //                                 epoch=1, minCount=1)
    //   m.get_subwords(w) -> (names, ids); the n-grams' ids are 8 + bucket, after the word's id.
    //   t.txt: "__label__a hello world café naïve\n__label__b straße 日本語 a\n"
    #[test]
    fn ngrams_and_buckets_match_fasttext() {
        let sw = Subwords::new(3, 6, 1_000_000).unwrap();
        let cases: [(&str, &[&str], &[u64]); 5] = [
            (
                "hello",
                &[
                    "<he", "<hel", "<hell", "<hello", "hel", "hell", "hello", "hello>", "ell",
                    "ello", "ello>", "llo", "llo>", "lo>",
                ],
                &[
                    188588, 128672, 361316, 760913, 613750, 198318, 831731, 68695, 992352, 798173,
                    616889, 617350, 350920, 504798,
                ],
            ),
            (
                "café",
                &[
                    "<ca", "<caf", "<café", "<café>", "caf", "café", "café>", "afé", "afé>", "fé>",
                ],
                &[
                    916755, 991839, 794647, 17195, 369669, 454609, 761693, 960370, 966020, 609705,
                ],
            ),
            (
                "日本語",
                &["<日本", "<日本語", "<日本語>", "日本語", "日本語>", "本語>"],
                &[758595, 4589, 524617, 35567, 928931, 674363],
            ),
            ("a", &["<a>"], &[87608]),
            ("zz", &["<zz", "<zz>", "zz>"], &[777875, 257975, 1049]),
        ];
        for (word, names, ids) in cases {
            let (got, buckets) = grams(&sw, word);
            assert_eq!(got, names, "{word}");
            let fasttext: Vec<u64> = ids.iter().map(|id| id - 8).collect();
            assert_eq!(buckets, fasttext, "{word}");
        }
    }

    #[test]
    fn lengths_are_characters_and_edges_are_no_unigrams() {
        let sw = Subwords::new(1, 2, 7).unwrap();
        let (got, _) = grams(&sw, "ïa");
        assert_eq!(got, ["<ï", "ï", "ïa", "a", "a>"]);
        let mut ids = Vec::new();
        Subwords::new(5, 6, 10)
            .unwrap()
            .push_ids("ab", 100, &mut ids);
        assert!(ids.is_empty(), "\"<ab>\" has 4 characters: {ids:?}");
    }

    #[test]
    fn bad_settings_are_named() {
        let e = |minn, maxn, buckets| Subwords::new(minn, maxn, buckets).unwrap_err().to_string();
        assert!(e(0, 3, 10).contains("minn"), "{}", e(0, 3, 10));
        assert!(e(4, 3, 10).contains("maxn") && e(4, 3, 10).contains("minn (4)"));
        assert!(e(3, 6, 0).contains("subword_buckets"), "{}", e(3, 6, 0));
    }
}
