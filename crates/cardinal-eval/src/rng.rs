//! A tiny seeded PRNG (SplitMix64) for the bootstrap and the permutation test.
//!
//! No dependency and no global state: every resampling stream is seeded from the configured
//! seed and a hash of what it resamples (slice and key), so results do not depend on the order
//! in which slices or keys are computed.

/// SplitMix64 (Steele, Lea and Flood 2014): 64-bit state, passes BigCrush, trivially seedable.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose stream is determined by `seed` and the byte labels in `parts`.
    pub(crate) fn for_stream(seed: u64, parts: &[&str]) -> Self {
        let mut h = fnv1a(b"cardinal-eval", 0xcbf2_9ce4_8422_2325);
        for p in parts {
            h = fnv1a(p.as_bytes(), h);
            // A separator so ("ab", "c") and ("a", "bc") differ.
            h = fnv1a(&[0xff], h);
        }
        let mut g = SplitMix64 { state: seed ^ h };
        // Discard one output so nearby seeds do not start with correlated values.
        g.next_u64();
        g
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform index in `0..n` (`n >= 1`), by multiply-shift (Lemire); the bias is below
    /// `n / 2^64`, negligible for the sample sizes here.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// FNV-1a over `bytes`, continuing from `h`.
fn fnv1a(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_distinct() {
        let a: Vec<u64> = {
            let mut g = SplitMix64::for_stream(7, &["overall", "k"]);
            (0..4).map(|_| g.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut g = SplitMix64::for_stream(7, &["overall", "k"]);
            (0..4).map(|_| g.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut g = SplitMix64::for_stream(7, &["overal", "lk"]);
            (0..4).map(|_| g.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut g = SplitMix64::for_stream(1, &[]);
        let mut seen = [0usize; 5];
        for _ in 0..10_000 {
            seen[g.below(5)] += 1;
        }
        assert!(seen.iter().all(|&c| c > 1_700 && c < 2_300), "{seen:?}");
    }
}
