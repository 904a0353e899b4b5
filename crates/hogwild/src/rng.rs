//! The crate's one small random generator, for reproducible shuffles and sampling.

/// SplitMix64: a small, well-mixed generator for reproducible shuffles.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        // `mix64` adds the step itself: this is the mix of the advanced state.
        let z = crate::models::mix64(self.0);
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// A seeded Fisher-Yates shuffle.
pub(crate) fn shuffle<T>(order: &mut [T], rng: &mut SplitMix64) {
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
}

/// Reproducible test inputs: `n` values uniform in `[0, scale)` (`positive`) or
/// `[-scale/2, scale/2)`, converted to `T`.
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
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
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
}
