//! Synthetic media for the EWF writer's tests and benches (shared by path
//! with the root `tests/ewf_*.rs` and the criterion bench): text-like runs
//! (compressible), noise (incompressible) and zero runs, in irregular
//! lengths so chunk boundaries fall everywhere. Deterministic per seed.
//! Also the hex helpers the tests compare hashes with, and `ewfexport`.

/// `len` bytes of mixed media.
pub fn mixed_media(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let words: [&[u8]; 8] = [
        b"evidence ",
        b"sector ",
        b"cluster ",
        b"the ",
        b"case ",
        b"file ",
        b"deleted ",
        b"\n",
    ];
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let run = 1000 + (next() % 70_000) as usize;
        let end = (out.len() + run).min(len);
        match next() % 3 {
            0 => {
                while out.len() < end {
                    let w = words[(next() % 8) as usize];
                    let take = w.len().min(end - out.len());
                    out.extend_from_slice(&w[..take]);
                }
            }
            1 => {
                while out.len() < end {
                    out.push((next() >> 32) as u8);
                }
            }
            _ => out.resize(end, 0),
        }
    }
    out
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// MD5 of `data` as lowercase hex.
pub fn md5_hex(data: &[u8]) -> String {
    use md5::Digest;
    hex(&md5::Md5::digest(data))
}

/// Export an EWF image to raw with libewf's `ewfexport` (to `target.raw`,
/// removed again) and return the bytes.
pub fn ewfexport(first: &std::path::Path, target: &std::path::Path) -> Vec<u8> {
    let out = std::process::Command::new("ewfexport")
        .args(["-u", "-q", "-f", "raw", "-t"])
        .arg(target)
        .arg(first)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run ewfexport");
    assert!(
        out.status.success(),
        "ewfexport failed on {}: {}",
        first.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = target.with_extension("raw");
    let bytes = std::fs::read(&raw).expect("ewfexport output");
    let _ = std::fs::remove_file(&raw);
    let _ = std::fs::remove_file(target.with_extension("raw.info"));
    bytes
}
