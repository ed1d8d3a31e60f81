//! Criterion bench for the carve stage's scanner: the multi-signature
//! header search of every built-in signature over one read block, aligned
//! (sector starts only, like foremost `-q`) and unaligned, on disk-like
//! content (text, random and zero runs, with a header every 64 KiB or so).
//! This is the per-byte work of the scan's reader threads; the full stage,
//! with peers, is timed by `benches/scripts/carve-bench.sh`.

use caseload_engine::stages::carve::HeaderScanner;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

#[path = "support/disk_like.rs"]
mod disk_like;

/// Built-in headers planted in the sample.
const HEADERS: [&[u8]; 4] = [b"\xFF\xD8\xFF\xE0", b"%PDF-1.4", b"PK\x03\x04", b"<html"];

fn scan(c: &mut Criterion) {
    let data = disk_like::disk_like(8 << 20, &HEADERS);
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
