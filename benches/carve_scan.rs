//! Criterion bench for the carve stage's scanner: the multi-signature
//! header search of every built-in signature over one read block, aligned
//! (sector starts only, like foremost `-q`) and unaligned, on disk-like
//! content (text, random and zero runs, with a header every 64 KiB or so).
//! This is the per-byte work of the scan's reader threads; the full stage,
//! with peers, is timed by `benches/scripts/carve-bench.sh`.

use caseload_engine::stages::carve::HeaderScanner;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

/// Mixed content like unallocated space, with a planted header now and
/// then so hits are verified as well as searched for.
fn sample(len: usize) -> Vec<u8> {
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
    let headers: [&[u8]; 4] = [b"\xFF\xD8\xFF\xE0", b"%PDF-1.4", b"PK\x03\x04", b"<html"];
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
        if next() % 16 == 0 {
            let pad = (512 - out.len() % 512) % 512;
            out.extend(std::iter::repeat_n(0u8, pad));
            out.extend_from_slice(headers[(next() % 4) as usize]);
        }
    }
    out.truncate(len);
    out
}

fn scan(c: &mut Criterion) {
    let data = sample(8 << 20);
    let mut g = c.benchmark_group("carve-header-scan-8MiB");
    g.throughput(Throughput::Bytes(data.len() as u64));
    for (name, aligned) in [("aligned", true), ("unaligned", false)] {
        let Ok(scanner) = HeaderScanner::builtin(aligned) else {
            panic!("the built-in signatures build a search");
        };
        g.bench_function(name, |b| {
            b.iter(|| black_box(scanner.count(black_box(&data), 1 << 20)))
        });
    }
    g.finish();
}

criterion_group!(benches, scan);
criterion_main!(benches);
