//! Sample data shared by the criterion benches.

/// Mixed content like a disk or its unallocated space: text-like runs,
/// random runs and zeros, deterministic. With `headers`, one of them is
/// planted at a sector start now and then (about every 16 runs), so that a
/// scanner's hits are verified as well as searched for.
pub fn disk_like(len: usize, headers: &[&[u8]]) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let words: [&[u8]; 8] = [
        b"the ",
        b"evidence ",
        b"of ",
        b"storage ",
        b"case ",
        b"stage ",
        b"and ",
        b"file ",
    ];
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        match next() % 4 {
            0 | 1 => {
                for _ in 0..512 {
                    out.extend_from_slice(words[(next() % 8) as usize]);
                }
            }
            2 => out.extend((0..4096).map(|_| next() as u8)),
            _ => out.extend(std::iter::repeat_n(0u8, 4096)),
        }
        if !headers.is_empty() && next() % 16 == 0 {
            let pad = (512 - out.len() % 512) % 512;
            out.extend(std::iter::repeat_n(0u8, pad));
            out.extend_from_slice(headers[(next() % headers.len() as u64) as usize]);
        }
    }
    out.truncate(len);
    out
}
