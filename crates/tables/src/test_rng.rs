//! The unit tests' pseudo-random numbers: xorshift64 (13, 7, 17), seeded,
//! so a failing case replays exactly.

pub(crate) struct XorShift(u64);

impl XorShift {
    /// `seed` must not be 0 (xorshift stays at 0).
    pub(crate) fn new(seed: u64) -> XorShift {
        assert_ne!(seed, 0);
        XorShift(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
