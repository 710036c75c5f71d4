//! The tests' randomness, shared by the test crates that include this file
//! (`#[path = ".../tests/support/rng.rs"] mod rng;`): one generator, so a
//! seed means the same sequence everywhere.
#![allow(dead_code)] // each includer uses some of it

/// xorshift64*: deterministic, dependency-free randomness.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `1 / n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (self.next() as u128 % span) as i128) as i64
    }

    /// Log-uniform in `lo..=hi` (`1 <= lo <= hi`): every order of magnitude equally likely.
    pub fn log_range(&mut self, lo: i64, hi: i64) -> i64 {
        let (a, b) = ((lo.max(1) as f64).ln(), (hi as f64).ln());
        let x = a + (b - a) * (self.next() as f64 / u64::MAX as f64);
        (x.exp().round() as i64).clamp(lo, hi)
    }
}
