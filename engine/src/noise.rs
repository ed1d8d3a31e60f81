//! Test data: deterministic bytes that are not a repeating pattern
//! (xorshift64), for the engine's unit tests.

/// `len` bytes from `seed` (any value; zero is made odd).
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
