//! The crate's random generators and hash mixers, all in one place.
//!
//! Their exact bits are part of what a seed and a hashed id mean: model initialisation, shuffles,
//! word2vec's sampling, the CTR models' feature buckets and the converters' hashed ids (and so
//! every checkpoint and converted file) depend on them. None may change; a different generator
//! is a new function beside the old ones, named for how it differs.
//!
//! Public because the command (the demo's corpus), the benchmarks and the integration tests
//! generate their data with the same functions.
//!
//! ```
//! use hogwild::rng::{mix64, shuffle, SplitMix64};
//!
//! let mut order: Vec<u32> = (0..10).collect();
//! shuffle(&mut order, &mut SplitMix64(7));
//! let mut rng = SplitMix64(7);
//! assert_eq!(rng.next(), mix64(7)); // the first output mixes the advanced state
//! ```

/// The golden-ratio increment of SplitMix64 (2^64 / phi, odd).
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's step and finaliser: a bijective mix of 64 bits (seeds, hashing of ids; the CTR
/// models hash a field's id as `mix64(id ^ salt)`). `mix64(x)` is the output of a [`SplitMix64`]
/// in state `x`, so iterating `s = mix64(s)` is a generator too (a different stream from
/// `SplitMix64(s)`, whose state only advances by the increment).
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(GOLDEN_GAMMA);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// SplitMix64 (Steele, Lea and Flood): a small, well-mixed generator for reproducible shuffles,
/// sampling and test data. The field is the state; any value, zero included, is a valid seed.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next output.
    // A generator never ends: as an `Iterator` every caller would unwrap an `Option` that is
    // always `Some`.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> u64 {
        // `mix64` adds the increment itself: this is the mix of the advanced state.
        let z = mix64(self.0);
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        z
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift.
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// xorshift64* (Vigna): three shifts and a multiply, the cheapest generator here, for the hot
/// loops that draw per training pair (word2vec's subsampling, windows and negatives). The state
/// must not be zero (zero stays zero).
#[derive(Debug, Clone)]
pub struct XorShift64Star(pub u64);

impl XorShift64Star {
    /// A generator whose state is `mix64(seed)` with the low bit set: never zero, and nearby seeds
    /// (a base seed plus a row or worker number) give unrelated streams.
    pub fn from_seed(seed: u64) -> Self {
        Self(mix64(seed) | 1)
    }

    /// The next output: the state's xorshift, multiplied.
    // A generator never ends: as an `Iterator` every caller would unwrap an `Option` that is
    // always `Some`.
    #[allow(clippy::should_implement_trait)]
    #[inline(always)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Marsaglia's xorshift64 (shifts 13, 7, 17): the state is the output, no multiply. Weaker than
/// [`XorShift64Star`] in the low bits; what the benchmarks and test inputs use to draw data and
/// random rows. The state must not be zero (zero stays zero).
#[derive(Debug, Clone)]
pub struct XorShift64(pub u64);

impl XorShift64 {
    /// The next output (the new state).
    // A generator never ends: as an `Iterator` every caller would unwrap an `Option` that is
    // always `Some`.
    #[allow(clippy::should_implement_trait)]
    #[inline(always)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A seeded Fisher-Yates shuffle.
pub fn shuffle<T>(order: &mut [T], rng: &mut SplitMix64) {
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
}

/// The top 53 bits of `x` as an `f64` uniform in `[0, 1)` (every value exact).
#[inline]
pub fn unit_f64(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The top 24 bits of `x` as an `f32` uniform in `[0, 1)` (every value exact): the weight
/// initialisation of the models.
#[inline]
pub fn unit_f32(x: u64) -> f32 {
    (x >> 40) as f32 / (1u64 << 24) as f32
}

/// 64-bit FNV-1a over `bytes`: the converters' hashed feature ids, and (mixed by [`mix64`]) the
/// CTR models' field salts.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// fastText's word hash: 32-bit FNV-1a over the bytes, each byte sign-extended as fastText does
/// (so it differs from plain FNV-1a on bytes above 127).
pub fn fasttext_hash(word: &str) -> u32 {
    fasttext_hash_bytes(word.as_bytes())
}

/// [`fasttext_hash`] over bytes (a character n-gram, [`crate::subwords`]).
pub fn fasttext_hash_bytes(bytes: &[u8]) -> u32 {
    bytes.iter().fold(2_166_136_261u32, |h, &b| {
        (h ^ (b as i8 as i32 as u32)).wrapping_mul(16_777_619)
    })
}

/// fastText's word n-gram hash step: `a * 116049371 + b`, wrapping (its `addWordNgrams`). The
/// bag-of-words model combines word ids with it, the fastText converter sign-extended word
/// hashes, as fastText does.
#[inline]
pub fn fasttext_bigram(a: u64, b: u64) -> u64 {
    a.wrapping_mul(FASTTEXT_NGRAM_MULT).wrapping_add(b)
}

/// fastText's n-gram hash multiplier.
pub const FASTTEXT_NGRAM_MULT: u64 = 116_049_371;

/// Reproducible test inputs: `n` values uniform in `[0, scale)` (`positive`) or
/// `[-scale/2, scale/2)`, converted to `T`.
/// Walker's alias table: draws id `i` with probability `weights[i] / sum` in constant time.
#[derive(Debug, Clone)]
pub(crate) struct AliasTable {
    /// Per bucket: keep the bucket's own id when the low 32 random bits are below this.
    threshold: Vec<u32>,
    alias: Vec<u32>,
}

impl AliasTable {
    /// The table for non-negative `weights` with a positive sum.
    pub(crate) fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        let sum: f64 = weights.iter().sum();
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / sum).collect();
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let mut threshold = vec![u32::MAX; n];
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            threshold[s] = (scaled[s] * 4_294_967_296.0).min(u32::MAX as f64) as u32;
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        Self { threshold, alias }
    }

    /// The id drawn by random bits `r`.
    #[inline(always)]
    pub(crate) fn sample(&self, r: u64) -> u32 {
        let bucket = (((r >> 32) * self.threshold.len() as u64) >> 32) as usize;
        if (r as u32) < self.threshold[bucket] {
            bucket as u32
        } else {
            self.alias[bucket]
        }
    }
}

#[cfg(test)]
pub(crate) fn test_values<T: crate::optim::Real>(
    seed: u64,
    n: usize,
    scale: f64,
    positive: bool,
) -> Vec<T> {
    let mut rng = SplitMix64(seed);
    (0..n)
        .map(|_| {
            let u = unit_f64(rng.next());
            let x = if positive {
                u * scale
            } else {
                (u - 0.5) * scale
            };
            T::from(x).unwrap_or(T::zero())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_seeded_permutations() {
        let mut a: Vec<u32> = (0..100).collect();
        let mut b = a.clone();
        shuffle(&mut a, &mut SplitMix64(7));
        shuffle(&mut b, &mut SplitMix64(7));
        assert_eq!(a, b);
        assert_ne!(a, (0..100).collect::<Vec<_>>());
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        let mut rng = SplitMix64(1);
        assert!((0..1000).all(|_| rng.below(3) < 3));
    }

    /// The generators' first outputs, pinned: seeds, checkpoints and hashed buckets depend on them.
    /// Reference values from the published algorithms (python, 64-bit wrapping arithmetic):
    ///
    /// ```text
    /// M = 2**64 - 1
    /// def mix64(x):
    ///     x = (x + 0x9E3779B97F4A7C15) & M
    ///     x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    ///     x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    ///     return x ^ (x >> 31)
    /// def xorshift64star(s):
    ///     s ^= s >> 12; s ^= (s << 25) & M; s ^= s >> 27
    ///     return s, (s * 0x2545F4914F6CDD1D) & M
    /// def xorshift64(s):
    ///     s ^= (s << 13) & M; s ^= s >> 7; s ^= (s << 17) & M
    ///     return s
    /// ```
    #[test]
    fn outputs_are_pinned() {
        assert_eq!(mix64(0), 0xE220_A839_7B1D_CDAF);
        let mut s = SplitMix64(0);
        assert_eq!(
            [s.next(), s.next()],
            [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4]
        );
        let mut x = XorShift64Star(1);
        assert_eq!(
            [x.next(), x.next()],
            [0x47E4_CE4B_896C_DD1D, 0xABCF_A6A8_E079_651D]
        );
        let mut x = XorShift64(1);
        assert_eq!([x.next(), x.next()], [0x4082_2041, 0x1000_4106_0C01_1441]);
        assert_eq!(fnv1a64(b""), 0xCBF2_9CE4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xAF63_DC4C_8601_EC8C);
        assert_eq!(fasttext_hash("a"), 0xE40C_292C);
        assert_eq!(unit_f32(u64::MAX), 1.0 - 1.0 / (1u64 << 24) as f32);
        assert_eq!(unit_f64(1 << 11), 1.0 / (1u64 << 53) as f64);
    }
}
