//! Seeded randomness: every client and the nemesis draw from a stream of their own, derived
//! from the run's seed, so that one seed replays the same schedule of operations and faults.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// One seeded stream.
#[derive(Debug, Clone)]
pub struct Rng(ChaCha8Rng);

impl Rng {
    /// The stream `stream` of the run seeded with `seed` (streams of one seed are independent).
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Rng(rng)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0, "below(0)");
        self.0.next_u64() % n
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        debug_assert!(low <= high);
        low + self.below(high - low + 1)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// An index into `weights`, drawn in proportion to them.
    pub fn weighted(&mut self, weights: &[u64]) -> usize {
        let total: u64 = weights.iter().sum();
        let mut at = self.below(total.max(1));
        for (i, w) in weights.iter().enumerate() {
            if at < *w {
                return i;
            }
            at -= w;
        }
        weights.len() - 1
    }

    /// `n` random bytes as lower-case hex.
    pub fn hex(&mut self, n: usize) -> String {
        let mut bytes = vec![0u8; n];
        self.0.fill_bytes(&mut bytes);
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A raw 64-bit draw.
    pub fn draw(&mut self) -> u64 {
        self.0.next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_replays_the_same_stream_and_streams_differ() {
        let (mut a, mut b, mut c) = (Rng::new(7, 1), Rng::new(7, 1), Rng::new(7, 2));
        let xs: Vec<u64> = (0..16).map(|_| a.draw()).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.draw()).collect();
        let zs: Vec<u64> = (0..16).map(|_| c.draw()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn weighted_draws_follow_the_weights() {
        let mut r = Rng::new(1, 0);
        let mut counts = [0u32; 3];
        for _ in 0..10_000 {
            counts[r.weighted(&[1, 0, 3])] += 1;
        }
        assert_eq!(counts[1], 0);
        assert!(counts[2] > counts[0] * 2, "{counts:?}");
    }
}
